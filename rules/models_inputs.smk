# Input functions and params of rules/models.smk, and what every job of a model (run_model,
# image_attention) reads of its entry.


def get_train_input(wildcards):
    """The training split's questions and its images, or the model's feature table."""
    inputs = {"questions": f"resources/datasets/{DATASET}/train/questions.parquet"}
    source = FEATURE_MODELS.get(wildcards.model)
    if source is None:
        inputs["images"] = f"resources/datasets/{DATASET}/train/images"
    else:
        inputs["features"] = feature_path(source, "train")
        inputs.update(get_word_vectors_input(wildcards))
    return inputs


def get_train_params(wildcards):
    # The thread count is a setting of training: its sums, so its weights, depend on it.
    train = dict(config["models"][wildcards.model]["train"], threads=config["threads"]["train"])
    if train.get("swapmix"):
        # SwapMix re-renders the training scenes (or swaps their feature rows): which ones
        # depends on these.
        dataset = config["dataset"]
        train.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["train_split"])
        source = FEATURE_MODELS.get(wildcards.model)
        if source is not None:
            train.update(
                swap_mode=swap_mode(source),
                word_vectors=word_vectors_identity(),
                threshold=config["context"]["threshold"],
                class_attributes=config["context"]["class_attributes"],
            )
    return canonical(train)


def get_model_dir(model):
    """Checkpoint directory the workflow trains, or None for an external model."""
    if "train" in config["models"][model]:
        return f"resources/models/{DATASET}/{model}"
    return None


def get_model_input(model):
    """The checkpoint folder as a job input: the one the workflow trains, or a local
    folder the entry names (so that weights replaced in place rerun the model's jobs;
    inside a job the resume fingerprint then compares their content)."""
    trained = get_model_dir(model)
    if trained is not None:
        return {"model": trained}
    path = config["models"][model].get("path_or_id")
    return {"model": user_path(path)} if path and os.path.isdir(path) else {}


def get_model_spec(wildcards):
    """What can change the model's answers (canonical); runtime settings stay out."""
    entry = dict(config["models"][wildcards.model])
    trained = get_model_dir(wildcards.model)
    if trained is not None:
        entry["path_or_id"] = trained
    return answer_spec(entry)


def get_model_code(wildcards):
    """The digest of the code that computes the model's answers (its family's adapter
    and inference.py): an edit to it reruns the model's jobs."""
    return family_code_digest(config["models"][wildcards.model]["family"])


def get_model_runtime_options(wildcards):
    """Batch size and the like: the runtime channel (they never change an answer)."""
    return Runtime(runtime_options(config["models"][wildcards.model]))


def get_model_gpus(wildcards):
    return 0 if config["models"][wildcards.model]["device"] == "cpu" else 1


def get_model_gpu_model(wildcards):
    entry = config["models"][wildcards.model]
    return entry.get("gpu_model", "") if get_model_gpus(wildcards) else ""


_GPU_MEMORY = {}


def get_model_gpu_memory(wildcards):
    """GB of GPU memory a GPU job of the model requests (0 on the CPU or when unknown):
    the entry's gpu_memory_gb, or its estimate from the cached checkpoint (auto), once
    per model."""
    model = wildcards.model
    if not get_model_gpus(wildcards):
        return 0
    if model not in _GPU_MEMORY:
        from vqarobust.models.memory import entry_gpu_memory_gb

        _GPU_MEMORY[model] = entry_gpu_memory_gb(model, config["models"][model]) or 0
    return _GPU_MEMORY[model]


def get_model_mem_mb(wildcards):
    return config["models"][wildcards.model]["mem_mb"]


def get_model_runtime(wildcards):
    return config["models"][wildcards.model]["runtime"]
