import re

from vqarobust.config import validate_config
from vqarobust.corruptions import ENGINE_VERSION, family

# Validate before any job runs: a wrong key or value fails here, naming it.
validate_config(config, workflow.source_path("../workflow/schemas/config.schema.yaml"))

DATASET = config["dataset"]["name"]
MODELS = list(config["models"])
CORRUPTIONS = list(config["corruptions"])
SEVERITIES = sorted(set(config["severities"]) - {0})


def _alternatives(names):
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    dataset=re.escape(DATASET),
    split="train|eval",
    model=_alternatives(MODELS),
    corruption=_alternatives(CORRUPTIONS),
    subset=_alternatives(["clean", *CORRUPTIONS]),
    severity="[1-5]",


def get_final_outputs(wildcards):
    return [
        f"results/{DATASET}/robustness.duckdb",
        f"results/{DATASET}/report/index.html",
    ]


def get_dataset_params(wildcards):
    ds = config["dataset"]
    if wildcards.split == "train":
        return {"split": ds["train_split"], "n_images": ds["train_n_images"]}
    return {"split": ds["split"], "n_images": ds["n_images"]}


def get_train_params(wildcards):
    return config["models"][wildcards.model]["train"]


def get_model_dir(model):
    """Checkpoint directory the workflow trains, or None for an external model."""
    if "train" in config["models"][model]:
        return f"resources/models/{DATASET}/{model}"
    return None


def get_model_spec(wildcards):
    """The model's config entry as load_model takes it (training settings left out)."""
    entry = {k: v for k, v in config["models"][wildcards.model].items() if k != "train"}
    trained = get_model_dir(wildcards.model)
    if trained is not None:
        entry["path_or_id"] = trained
    return entry


def get_infer_input(wildcards):
    inputs = {"questions": f"resources/datasets/{DATASET}/eval/questions.parquet"}
    if wildcards.subset == "clean":
        inputs["images"] = [f"resources/datasets/{DATASET}/eval/images"]
    else:
        inputs["images"] = expand(
            "results/{dataset}/images/{corruption}/{severity}",
            dataset=DATASET,
            corruption=wildcards.subset,
            severity=SEVERITIES,
        )
    trained = get_model_dir(wildcards.model)
    if trained is not None:
        inputs["model"] = trained
    return inputs


def get_subset_severities(wildcards):
    return [0] if wildcards.subset == "clean" else SEVERITIES


def get_prediction_files(wildcards):
    return expand(
        "results/{dataset}/predictions/{model}/{subset}.parquet",
        dataset=DATASET,
        model=MODELS,
        subset=["clean", *CORRUPTIONS],
    )


def get_families(wildcards):
    return {c: family(c) for c in CORRUPTIONS}


def get_vre_preferences(wildcards):
    return config["vre"]["preferences"]
