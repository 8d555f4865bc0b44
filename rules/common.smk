import os
import re
import sys

from vqarobust.config import ConfigError, validate_config
from vqarobust import perturbations, text
from vqarobust.corruptions import ENGINE_VERSION, family, max_severity
from vqarobust.context.swapmix import context_max_swaps
from vqarobust.datasets import dataset_job
from vqarobust.features import word_vectors
from vqarobust.models import FEATURE_FAMILIES, exposes_attention
from vqarobust.models import GENERATIVE_FAMILIES as GENERATIVE
from vqarobust.params import answer_spec, canonical, runtime_options
from vqarobust.runtime import Runtime, shard_bytes
from vqarobust.report.outputs import FIGURES as REPORT_FIGURES
from vqarobust.report.outputs import LATEX_TABLES as REPORT_LATEX
from vqarobust.report.outputs import TABLES as REPORT_TABLES

# A shipped study (config/paper.yaml, config/scenes.yaml) merged into the default would
# silently run the default's question study too: refuse it, saying how to run it.
_cli_config = workflow.config_settings.overwrite_config or {}
if _cli_config.get("study") and not workflow.config_settings.replace_workflow_config:
    sys.exit(
        f"config error at study: {config['study']!r} is a study of its own; run it with "
        "--replace-workflow-config (without it, --configfile merges the study into "
        "config/config.yaml and the default's text and basic-question study would run too)"
    )
# Validate before any job runs: a wrong key or value fails here, naming it. The message
# is all a person needs; a traceback would only bury it.
try:
    validate_config(config)
except ConfigError as exc:
    sys.exit(str(exc))

DATASET = config["dataset"]["name"]
SHARDS = shard_bytes(config["storage"])
MODELS = list(config["models"])
CORRUPTIONS = list(config["corruptions"])
# Controls (the blank images) run like corruptions at their one severity; load_duckdb keeps
# them out of the robustness metrics.
CONTROLS = list(config["controls"])
SEVERITIES = sorted(set(config["severities"]) - {0})
# Text perturbations that cannot run here (the WordNet ones without WordNet) are skipped
# with a message, and the report counts them.
SKIPPED_TEXT = {
    name: text.wordnet.missing_message()
    for name in config["text"]["perturbations"]
    if name not in text.names(available=True)
}
TEXT = [p for p in config["text"]["perturbations"] if p not in SKIPPED_TEXT]
SENTENCE = list(config["text"]["sentence"])
# Basic-question perturbations: every ranker on every basic-question dataset (bq_* on the
# general pool, ynbq_* on its yes/no questions); METEOR without WordNet is skipped like
# the WordNet text perturbations.
BQ = config["basic_questions"]
_BQ_ALL = [text.ranking.perturbation_name(r, d) for d in BQ["datasets"] for r in BQ["rankers"]]
SKIPPED_RANKERS = {
    n: text.wordnet.missing_message()
    for n in _BQ_ALL
    if text.ranking.needs(n) == "wordnet" and text.wordnet_dir() is None
}
RANKERS = [n for n in _BQ_ALL if n not in SKIPPED_RANKERS]
if BQ["vqabq"]["enabled"] and BQ["vqabq"]["ranker"] in SKIPPED_RANKERS:
    sys.exit(
        f"config error at basic_questions.vqabq.ranker: {BQ['vqabq']['ranker']} cannot run "
        f"here ({text.wordnet.missing_message()}); choose another ranker"
    )
POOL_SOURCES = text.pools.pool_sources(BQ["pool"], BQ["pool_files"])
# VQABQ asks generative and chat models a chain of questions (one more subset each); the
# classifiers' answers with basic questions are their level-1 answers.
CHAIN_MODELS = [
    m for m in MODELS if BQ["vqabq"]["enabled"] and config["models"][m]["family"] in GENERATIVE
]
BQ_LEVELS = list(range(1, config["basic_questions"]["k"] // 3 + 1))
# SwapMix context perturbations (scenes datasets): one subset each, severity = the index
# of a question's swap of that kind.
CONTEXT = list(config["context"]["perturbations"])
CONTEXT_SEVERITIES = list(range(1, context_max_swaps(config["context"]) + 1))
SUBSETS = ["clean", *CORRUPTIONS, *CONTROLS, *TEXT, *SENTENCE, *RANKERS, *CONTEXT]
# Region-feature models (LXMERT) read a feature source instead of pixels: every subset
# still, with the features of its images (docs/context.md, "Feature models").
FEATURES = config["features"]
FEATURE_MODELS = {
    m: config["models"][m]["features"]
    for m in MODELS
    if config["models"][m]["family"] in FEATURE_FAMILIES
}
FEATURE_SOURCES = sorted(set(FEATURE_MODELS.values()))
PIXEL_MODELS = [m for m in MODELS if m not in FEATURE_MODELS]
CHAIN = text.ranking.CHAIN
# Said in dry runs too: what a run would leave out is worth knowing before it starts.
if workflow.is_main_process:
    if SKIPPED_TEXT:
        names = ", ".join(SKIPPED_TEXT)
        print(f"Skipping text perturbations {names}: {text.wordnet.missing_message()}")
    if SKIPPED_RANKERS:
        names = ", ".join(SKIPPED_RANKERS)
        print(f"Skipping basic-question rankers {names}: {text.wordnet.missing_message()}")
# Figure captions: package data, shared by the HTML report and Snakemake's native report.
CAPTIONS = "../src/vqarobust/report/captions"


def _alternatives(names):
    return "|".join(re.escape(n) for n in names)


wildcard_constraints:
    dataset=re.escape(DATASET),
    split="train|eval",
    model=_alternatives(MODELS),
    corruption=_alternatives([*CORRUPTIONS, *CONTROLS]),
    perturbation=_alternatives(TEXT or ["-"]),
    sentence=_alternatives(SENTENCE or ["-"]),
    ranker=_alternatives(RANKERS or ["-"]),
    source=_alternatives(POOL_SOURCES or ["-"]),
    feature=_alternatives(list(FEATURES) or ["-"]),
    subset=_alternatives([*SUBSETS, CHAIN]),
    severity="[1-9]",


def get_final_outputs(wildcards):
    return [
        f"results/{DATASET}/robustness.duckdb",
        f"results/{DATASET}/report/index.html",
        *expand(
            "results/{dataset}/basic_questions/{ranker}.{ext}",
            dataset=DATASET,
            ranker=RANKERS,
            ext=("parquet", "json"),
        ),
    ]


def user_path(path):
    """A file the config names (data, weights): relative to the working directory, never
    under a module's prefix (docs/workflow.md, "Using vqarobust as a module")."""
    return local(path)


def get_dataset_input(wildcards):
    inputs = dataset_job(config["dataset"], wildcards.split, config["seed"])[0]
    return {key: user_path(path) for key, path in inputs.items()}


def get_dataset_params(wildcards):
    return dataset_job(config["dataset"], wildcards.split, config["seed"])[1]


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
            )
    return canonical(train)


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
        "word_vectors": word_vectors_identity(),
    }  # fmt: skip
    if config["dataset"]["adapter"] == "gqa":
        settings["adapter"] = "gqa"
    else:
        settings.update(scene_seed=config["dataset"].get("scene_seed", 0),
                        split=config["dataset"]["split"])  # fmt: skip
    return canonical(settings)


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


def get_model_runtime_options(wildcards):
    """Batch size and the like: the runtime channel (they never change an answer)."""
    return Runtime(runtime_options(config["models"][wildcards.model]))


def get_model_gpus(wildcards):
    return 0 if config["models"][wildcards.model]["device"] == "cpu" else 1


def get_model_gpu_model(wildcards):
    entry = config["models"][wildcards.model]
    return entry.get("gpu_model", "") if get_model_gpus(wildcards) else ""


def get_model_mem_mb(wildcards):
    return config["models"][wildcards.model]["mem_mb"]


def get_model_runtime(wildcards):
    return config["models"][wildcards.model]["runtime"]


def get_modality(wildcards):
    """The subset's modality: the perturbation registry's (a sentence rewrite, named in
    the config, is text)."""
    if wildcards.subset == "clean":
        return "clean"
    if wildcards.subset in SENTENCE:
        return "text"
    return perturbations.modality(wildcards.subset)


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
        inputs["question_sets"] = [get_chain_set(wildcards.model)]
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


def get_subset_severities(wildcards):
    if wildcards.subset == "clean":
        return [0]
    if wildcards.subset in CONTROLS:
        return [max_severity(wildcards.subset)]
    if wildcards.subset in RANKERS:
        return BQ_LEVELS
    if wildcards.subset in SENTENCE or wildcards.subset == CHAIN:
        return [1]
    if wildcards.subset in CONTEXT:
        return CONTEXT_SEVERITIES
    if wildcards.subset in CORRUPTIONS:
        return corruption_severities(wildcards.subset)
    return SEVERITIES


def get_question_sets(name):
    """The perturbed question sets of one text perturbation or ranker, by severity."""
    levels = BQ_LEVELS if name in RANKERS else [1] if name in SENTENCE else SEVERITIES
    return expand(
        "results/{dataset}/questions/{name}/{level}.parquet",
        dataset=DATASET,
        name=name,
        level=levels,
    )


def get_all_question_sets(wildcards):
    return [path for name in [*TEXT, *SENTENCE, *RANKERS] for path in get_question_sets(name)]


# A classifier checkpoint other than ViLT gets an empty table and a log line at run time.
ATTENTION_MODELS = (
    [m for m in MODELS if exposes_attention(config["models"][m])]
    if config["diagnostics"]["attention"]["n"]
    else []
)


def get_attention_subsets(wildcards):
    """(perturbation, severity) of the clean and every corrupted image folder (no controls)."""
    return [("clean", 0)] + [(c, s) for c in CORRUPTIONS for s in corruption_severities(c)]


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


def get_chain_set(model):
    return f"results/{DATASET}/questions/{CHAIN}/{model}/1.parquet"


def get_chain_input(wildcards):
    return {
        "questions": f"resources/datasets/{DATASET}/eval/questions.parquet",
        "rankings": f"results/{DATASET}/questions/rankings/{BQ['vqabq']['ranker']}.parquet",
    }


def get_chain_prompt(wildcards):
    return config["models"][wildcards.model].get("chain_prompt", text.ranking.DEFAULT_CHAIN_PROMPT)


def corruption_severities(name):
    """The configured severities a corruption has (a one-level corruption runs at 1)."""
    return [s for s in SEVERITIES if s <= max_severity(name)]


def get_outside_metrics(wildcards):
    """Image perturbations kept out of the robustness metrics (docs/metrics.md)."""
    keep = config["vre"]["include_grayscale"]
    return [] if keep or "grayscale" not in CORRUPTIONS else ["grayscale"]


# GQA may be read without its images (feature models only): then no image folder has
# shards, and the report shows no image samples.
HAS_IMAGES = config["dataset"]["adapter"] != "gqa" or bool(config["dataset"].get("images"))


def get_image_subsets(wildcards):
    """(perturbation, severity) of every image folder, for the report's sample grid."""
    if not HAS_IMAGES:
        return []
    pairs = [("clean", 0)]
    pairs += [(c, s) for c in CORRUPTIONS for s in corruption_severities(c)]
    pairs += [(c, max_severity(c)) for c in CONTROLS]
    return pairs


def get_image_folders(wildcards):
    return [
        (
            f"resources/datasets/{DATASET}/eval/images"
            if p == "clean"
            else f"results/{DATASET}/images/{p}/{s}"
        )
        for p, s in get_image_subsets(wildcards)
    ]


def get_families(wildcards):
    families = {c: family(c) for c in [*CORRUPTIONS, *CONTROLS]}
    families.update({p: text.level(p) for p in [*TEXT, *SENTENCE]})
    families.update({r: text.ranking.ranker_family(r) for r in RANKERS})
    return families


def get_text_params(wildcards):
    t = config["text"]
    params = {"min_similarity": t["min_similarity"], "max_tries": t["max_tries"]}
    if t["min_similarity"] is not None:
        # Only a filter that runs can drop a question or use another encoder.
        params |= {k: t[k] for k in ("on_low_similarity", "similarity_encoder")}
    return canonical(params)


def get_sentence_params(wildcards):
    """What can change a rewrite: the models, prompts and generation length."""
    settings = dict(config["text"]["sentence"][wildcards.sentence])
    for key in SENTENCE_RUNTIME:
        settings.pop(key, None)
    return canonical(settings)


# A rewriter's batch and whether it may download: they never change a rewrite.
SENTENCE_RUNTIME = ("batch_size", "allow_download")


def get_sentence_runtime(wildcards):
    settings = config["text"]["sentence"][wildcards.sentence]
    return Runtime({k: settings[k] for k in SENTENCE_RUNTIME if k in settings})


def get_sentence_gpus(wildcards):
    return 1 if config["text"]["sentence"][wildcards.sentence].get("device") == "cuda" else 0


def get_pool_input(wildcards):
    """The pool tables (one per source, each encoded once)."""
    return expand(
        "results/{dataset}/questions/pool/{source}.parquet", dataset=DATASET, source=POOL_SOURCES
    )


def get_pool_source_input(wildcards):
    spec = POOL_SOURCES[wildcards.source]
    if spec["split"] is not None:
        return {"questions": f"resources/datasets/{DATASET}/{spec['split']}/questions.parquet"}
    inputs = {"questions": user_path(spec["questions"])}
    if spec["annotations"]:
        inputs["annotations"] = user_path(spec["annotations"])
    return inputs


def get_vqabq_input(wildcards):
    v = BQ["vqabq"]
    if not v["enabled"]:
        return {}
    return {"vqabq_rankings": f"results/{DATASET}/questions/rankings/{v['ranker']}.parquet"}


def get_vqabq_params(wildcards):
    """VQABQ's settings (thresholds only change the tables), or {} when it is off."""
    v = BQ["vqabq"]
    if not v["enabled"]:
        return {}
    return canonical({k: v[k] for k in ("ranker", "thresholds", "grid", "tune_share")})


def get_encoder_params(wildcards):
    """The sentence encoder's identity: what can change any embedding."""
    return canonical(text.encoder.identity(BQ["encoder"]))


def get_ranking_params(wildcards):
    # Only the LASSO ranker reads its mode, alpha, lambda and pre-filter.
    if text.ranking.ranker_name(wildcards.ranker) != "lasso":
        return canonical({"k": BQ["k"]})
    lasso = BQ["lasso"]
    keys = {"k": BQ["k"], "lasso_mode": lasso["mode"]}
    if lasso["mode"] == "paper":
        keys["lasso_lambda"] = lasso["lambda"]
    else:
        keys |= {"lasso_alpha": BQ["lasso_alpha"], "prefilter": BQ["prefilter"]}
    return canonical(keys)


def get_vre_preferences(wildcards):
    return canonical(config["vre"]["preferences"])


def get_corrupt_input(wildcards):
    inputs = {"images": f"resources/datasets/{DATASET}/eval/images"}
    if wildcards.corruption == "stylize":
        stylize = config["stylize"]
        inputs.update(weights=user_path(stylize["weights"]), styles=user_path(stylize["styles"]))
    return inputs


def get_stylize_params(wildcards):
    """The stylize settings for its own jobs (none for other corruptions)."""
    if wildcards.corruption != "stylize":
        return {}
    return canonical({"style_size": config["stylize"]["style_size"]})


def get_image_encoding(wildcards):
    encoding = {k: config["storage"][k] for k in ("image_format", "jpeg_quality")}
    return canonical(encoding)


def get_context_params(wildcards):
    """What changes the swaps: seeds, k, the perturbations (ordered as the rule's outputs),
    the scenes split or, on VQAv2, the smallest instance and the storage encoding."""
    dataset, context = config["dataset"], config["context"]
    settings = {"perturbations": CONTEXT, "seed": config["seed"], "k": context["k"]}
    if dataset["adapter"] == "scenes":
        settings.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["split"])
    else:
        encoding = config["storage"]
        settings.update(
            min_area=context["min_area"],
            image_format=encoding["image_format"],
            jpeg_quality=encoding["jpeg_quality"],
        )
    return settings


def get_context_sources(wildcards):
    """VQAv2: the clean images, the COCO images (donors) and the instance annotations."""
    if config["dataset"]["adapter"] != "vqav2":
        return {}
    return {
        "clean": f"resources/datasets/{DATASET}/eval/images",
        "source": user_path(config["dataset"]["images"]),
        "instances": user_path(config["context"]["instances"]),
    }


def get_context_input(wildcards):
    """The swap tables (pixels: with the swapped images, for the report's flipped
    examples; one per feature source that a feature model reads)."""
    if not CONTEXT:
        return {}
    inputs = {
        "feature_swaps": [
            f"results/{DATASET}/context/features/{s}/swaps.parquet" for s in FEATURE_SOURCES
        ]
    }
    if PIXEL_MODELS:
        inputs["context_swaps"] = f"results/{DATASET}/context/swaps.parquet"
        inputs["context_images"] = f"results/{DATASET}/context/images"
    return inputs
