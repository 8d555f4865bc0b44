# Input functions and params of rules/infer.smk (run_model, image_attention).


def get_modality(wildcards):
    """The subset's modality: the perturbation registry's (a sentence rewrite, named in
    the config, is text)."""
    if wildcards.subset == "clean":
        return "clean"
    if wildcards.subset in SENTENCE:
        return "text"
    return perturbations.modality(wildcards.subset)


def get_infer_input(wildcards):
    if wildcards.model in FEATURE_MODELS:
        return get_feature_infer_input(wildcards, FEATURE_MODELS[wildcards.model])
    inputs = {"questions": f"resources/datasets/{DATASET}/eval/questions.parquet"}
    if wildcards.subset in CONTEXT:
        # Every swap index of the perturbation: one question set, one image folder.
        inputs["images"] = [f"results/{DATASET}/context/images"]
        inputs["question_sets"] = [f"results/{DATASET}/context/{wildcards.subset}.parquet"]
    elif wildcards.subset == CHAIN:
        inputs["images"] = [f"resources/datasets/{DATASET}/eval/images"]
        inputs["question_sets"] = get_chain_sets(wildcards.model)
    elif wildcards.subset == "clean" or wildcards.subset in [*TEXT, *SENTENCE, *RANKERS]:
        inputs["images"] = [f"resources/datasets/{DATASET}/eval/images"]
        if wildcards.subset != "clean":
            inputs["question_sets"] = get_question_sets(wildcards.subset)
    else:
        inputs["images"] = expand(
            "results/{dataset}/images/{corruption}/{severity}",
            dataset=DATASET,
            corruption=wildcards.subset,
            severity=get_subset_severities(wildcards),
        )
    inputs.update(get_model_input(wildcards.model))
    return inputs


def get_feature_infer_input(wildcards, source):
    """A feature model's inputs: the features of the subset's images (the eval split's
    for question perturbations), and the feature swaps for a context subset."""
    inputs = {"questions": f"resources/datasets/{DATASET}/eval/questions.parquet"}
    subset = wildcards.subset
    if subset in CONTEXT:
        folder = f"results/{DATASET}/context/features/{source}"
        inputs["features"] = [feature_path(source, "eval")]
        inputs["question_sets"] = [f"{folder}/{subset}.parquet"]
        inputs["swaps"] = f"{folder}/swaps.parquet"
    elif subset == CHAIN:
        inputs["features"] = [feature_path(source, "eval")]
        inputs["question_sets"] = get_chain_sets(wildcards.model)
    elif subset == "clean" or subset in [*TEXT, *SENTENCE, *RANKERS]:
        inputs["features"] = [feature_path(source, "eval")]
        if subset != "clean":
            inputs["question_sets"] = get_question_sets(subset)
    else:
        inputs["features"] = [
            image_feature_path(source, subset, s) for s in get_subset_severities(wildcards)
        ]
    inputs.update(get_model_input(wildcards.model))
    return inputs


def get_subset_severities(wildcards):
    if wildcards.subset == "clean":
        return [0]
    if wildcards.subset in CONTROLS:
        return [max_severity(wildcards.subset)]
    if wildcards.subset in RANKERS:
        return BQ_LEVELS
    if wildcards.subset == CHAIN:
        return VQABQ_N
    if wildcards.subset in SENTENCE:
        return [1]
    if wildcards.subset in CONTEXT:
        # Every swap index of the question set: known once the swaps are made.
        return None
    if wildcards.subset in CORRUPTIONS:
        return corruption_severities(wildcards.subset)
    return SEVERITIES


# A classifier checkpoint other than ViLT gets an empty table and a log line at run time.
ATTENTION_MODELS = (
    [m for m in MODELS if exposes_attention(config["models"][m])]
    if config["diagnostics"]["attention"]["n"]
    else []
)


def get_attention_subsets(wildcards):
    """(perturbation, severity) of the clean and every corrupted image folder (no controls;
    no resizing corruption, whose token grid need not be the clean image's)."""
    kept = [c for c in CORRUPTIONS if not corruption_resizes(c)]
    return [("clean", 0)] + [(c, s) for c in kept for s in corruption_severities(c)]


def get_attention_input(wildcards):
    inputs = {
        "questions": f"resources/datasets/{DATASET}/eval/questions.parquet",
        "images": [
            (
                f"resources/datasets/{DATASET}/eval/images"
                if p == "clean"
                else f"results/{DATASET}/images/{p}/{s}"
            )
            for p, s in get_attention_subsets(wildcards)
        ],
    }
    inputs.update(get_model_input(wildcards.model))
    return inputs


def get_attention_files(wildcards):
    return expand("results/{dataset}/attention/{model}.parquet", dataset=DATASET,
                  model=ATTENTION_MODELS)  # fmt: skip


def get_prediction_files(wildcards):
    return expand(
        "results/{dataset}/predictions/{model}/{subset}.parquet",
        dataset=DATASET,
        model=MODELS,
        subset=SUBSETS,
    ) + [f"results/{DATASET}/predictions/{m}/{CHAIN}.parquet" for m in CHAIN_MODELS]
