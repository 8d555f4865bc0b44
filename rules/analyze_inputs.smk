# The run's options and the input functions of the analyze rule (rules/analyze.smk; a
# separate file: Snakemake's linter wants rules and functions apart).
from vqarobust.analyses import registry as ANALYSIS_REGISTRY
from vqarobust.analyses.base import RunOptions, settings_params
from vqarobust.code_digest import code_digest
from vqarobust.metrics import softmax_weights


def get_all_question_sets(wildcards):
    return [path for name in [*TEXT, *SENTENCE, *RANKERS] for path in get_question_sets(name)]


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


def get_ranker_methods(wildcards):
    """How each basic-question perturbation is ranked, in words (the R_score tables)."""
    settings = text.ranking.RankSettings(
        k=BQ["k"], alpha=BQ["lasso_alpha"], prefilter=BQ["prefilter"],
        lasso_mode=BQ["lasso"]["mode"], lasso_lambda=BQ["lasso"]["lambda"],
        exclude_main=BQ["exclude_main"], bleu_smoothing=BQ["bleu_smoothing"],
    )  # fmt: skip
    encoder = BQ.get("encoder") or text.encoder.ENCODER_NAME
    return {n: text.ranking.describe_ranker(n, settings, encoder) for n in RANKERS}


RUN_OPTIONS = RunOptions(
    metric=config["scoring"]["metric"],
    weights=softmax_weights(canonical(config["vre"]["preferences"])),
    families=get_families(None),
    rscore=canonical(config["rscore"]),
    seed=config["seed"],
    skipped=SKIPPED_TEXT | SKIPPED_RANKERS | SKIPPED_WEIGHTS,
    image_subsets=get_image_subsets(None),
    outside=get_outside_metrics(None),
    uncertainty=canonical(config["uncertainty"]),
    vqabq=get_vqabq_params(None),
    models=config["models"],
    features=config["features"],
    context=CONTEXT,
    reliance_k=config["context"].get("reliance_k") or [config["context"]["k"]],
    feature_sources=FEATURE_SOURCES if CONTEXT else [],
    rankers=get_ranker_methods(None),
    flip_questions=config["geometric"]["flip_questions"],
)
ANALYSES = {a.name: a for a in ANALYSIS_REGISTRY.active(RUN_OPTIONS)}


def tables_dir(name):
    return f"results/{DATASET}/tables/{name}"


def _context_files(wildcards):
    inputs = get_context_input(wildcards)
    if "context_swaps" in inputs:
        inputs["clean_images"] = f"resources/datasets/{DATASET}/eval/images"
    return inputs


# The workflow's files an analysis may read, by the group names analyses declare.
INPUT_GROUPS = {
    "questions": lambda wc: {"questions": f"resources/datasets/{DATASET}/eval/questions.parquet"},
    "info": lambda wc: {"info": f"resources/datasets/{DATASET}/eval/dataset.json"},
    "predictions": lambda wc: {"predictions": get_prediction_files(wc)},
    "question_sets": lambda wc: {"question_sets": get_all_question_sets(wc)},
    "images": lambda wc: {"images": get_image_folders(wc)},
    "attention": lambda wc: {"attention": get_attention_files(wc)},
    "context": _context_files,
    "vqabq_rankings": get_vqabq_input,
    "lpips": lambda wc: {"lpips": get_lpips_files(wc)},
}


def get_analysis_input(wildcards):
    analysis = ANALYSES[wildcards.analysis]
    inputs = {f"tables_{r}": tables_dir(r) for r in analysis.requires}
    for group in analysis.inputs:
        inputs.update(INPUT_GROUPS[group](wildcards))
    return inputs


def get_analysis_settings(wildcards):
    return settings_params(ANALYSES[wildcards.analysis].settings(RUN_OPTIONS))


# Computed once per run: the digest walks the package's import graph.
# A plugin's analysis: the digest of its own source (vqarobust.plugins).
ANALYSIS_CODE = {name: plugins.module_digest(a.module) for name, a in ANALYSES.items()}
