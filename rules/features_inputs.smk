# Input functions and params of rules/features.smk (region features, feature swaps) and the
# feature paths that training and inference read.


def feature_path(source, split):
    """The feature table of a clean split (train or eval)."""
    return f"resources/features/{DATASET}/{source}/{split}.parquet"


def image_feature_path(source, corruption, severity):
    """The features of a corrupted (or control) image folder. Perfect sight reads the
    scene graph, not the pixels: its features of a corrupted image are the clean ones."""
    if FEATURES[source]["kind"] == "perfect_sight":
        return feature_path(source, "eval")
    return f"results/{DATASET}/features/{source}/{corruption}/{severity}.parquet"


def swap_mode(source):
    """How a feature swap replaces a row: a donor's row, or perfect sight's new labels."""
    return "labels" if FEATURES[source]["kind"] == "perfect_sight" else "donor"


def word_vectors_identity():
    """What names the word vectors (the file itself is an input where it is read)."""
    path = config["context"].get("word_vectors")
    return {"file": path} if path else word_vectors.identity(None)


def get_word_vectors_input(wildcards):
    path = config["context"].get("word_vectors")
    return {"word_vectors": user_path(path)} if path else {}


def detector_dir(source):
    return f"resources/detectors/{DATASET}/{source}"


def get_detector_params(wildcards):
    source = FEATURES[wildcards.feature]
    settings = {k: source[k] for k in ("dim", "epochs", "batch_size", "learning_rate")}
    dataset = config["dataset"]
    settings.update(seed=config["seed"], scene_seed=dataset.get("scene_seed", 0),
                    split=dataset["train_split"], threads=config["threads"]["train"])  # fmt: skip
    return canonical(settings)


def _scene_split(split):
    dataset = config["dataset"]
    return dataset["train_split"] if split == "train" else dataset["split"]


def get_feature_input(wildcards):
    """What a feature table is made from: the split's images and the trained detector,
    or (perfect sight) the split's questions, whose images' scene graphs are read; on
    GQA also the scene graphs file and a released source's files."""
    source = FEATURES[wildcards.feature]
    kind = source["kind"]
    if config["dataset"]["adapter"] == "gqa":
        inputs = {
            "questions": f"resources/datasets/{DATASET}/{wildcards.split}/questions.parquet",
            "scene_graphs": user_path(config["dataset"]["scene_graphs"]),
            **{k: user_path(source[k]) for k in ("info", "folder") if k in source},
        }
        if "path" in source:
            inputs["tsv"] = user_path(source["path"])
        return (
            {**inputs, **get_word_vectors_input(wildcards)} if kind == "perfect_sight" else inputs
        )
    if kind == "detector":
        return {
            "images": f"resources/datasets/{DATASET}/{wildcards.split}/images",
            "detector": detector_dir(wildcards.feature),
        }
    return {
        "questions": f"resources/datasets/{DATASET}/{wildcards.split}/questions.parquet",
        **get_word_vectors_input(wildcards),
    }


def get_feature_params(wildcards):
    if config["dataset"]["adapter"] == "gqa":
        settings = {"kind": FEATURES[wildcards.feature]["kind"], "adapter": "gqa"}
        if settings["kind"] == "perfect_sight":
            settings["word_vectors"] = word_vectors_identity()
        return canonical(settings)
    settings = {"kind": FEATURES[wildcards.feature]["kind"],
                "scene_seed": config["dataset"].get("scene_seed", 0),
                "split": _scene_split(getattr(wildcards, "split", "eval"))}  # fmt: skip
    if settings["kind"] == "perfect_sight":
        settings["word_vectors"] = word_vectors_identity()
    return canonical(settings)


def get_swap_features_input(wildcards):
    """The eval split's questions and features (and, on GQA, the questions and scene
    graphs files: the reasoning steps select each question's relevant objects)."""
    inputs = {
        "questions": f"resources/datasets/{DATASET}/eval/questions.parquet",
        "features": feature_path(wildcards.feature, "eval"),
        **get_word_vectors_input(wildcards),
    }
    if config["dataset"]["adapter"] == "gqa":
        inputs["gqa_questions"] = user_path(config["dataset"]["questions"])
        inputs["scene_graphs"] = user_path(config["dataset"]["scene_graphs"])
    return inputs


def get_swap_features_params(wildcards):
    context = config["context"]
    settings = {
        "perturbations": CONTEXT, "seed": config["seed"], "k": context["k"],
        "threshold": context["threshold"], "mode": swap_mode(wildcards.feature),
        "class_attributes": context["class_attributes"],
        "max_objects": context["max_objects"],
        "word_vectors": word_vectors_identity(),
    }  # fmt: skip
    if config["dataset"]["adapter"] == "gqa":
        settings["adapter"] = "gqa"
    else:
        settings.update(scene_seed=config["dataset"].get("scene_seed", 0),
                        split=config["dataset"]["split"])  # fmt: skip
    return canonical(settings)
