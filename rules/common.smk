import os
import re
import sys

from vqarobust.config import ConfigError, missing_weights, validate_config
from vqarobust import perturbations, text
from vqarobust.corruptions import ENGINE_VERSION, family, max_severity
from vqarobust.corruptions import options as corruption_options
from vqarobust.corruptions import resizes as corruption_resizes
from vqarobust.datasets import dataset_job
from vqarobust.features import word_vectors
from vqarobust.models import FEATURE_FAMILIES, exposes_attention, family_code_digest
from vqarobust.models import GENERATIVE_FAMILIES as GENERATIVE
from vqarobust.params import answer_spec, canonical, runtime_options
from vqarobust.runtime import Runtime, shard_bytes
from vqarobust.report.outputs import FIGURES as REPORT_FIGURES
from vqarobust.report.outputs import LATEX_TABLES as REPORT_LATEX
from vqarobust.report.outputs import TABLES as REPORT_TABLES
from vqarobust import plugins, warm

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
# Plugins (docs/extending.md) load inside, first: validation checks corruption names and
# model families against the registries. The jobs load the same modules (vqarobust.jobs).
try:
    validate_config(config)
except ConfigError as exc:
    sys.exit(str(exc))
os.environ[plugins.ENV] = ",".join(config["plugins"])

DATASET = config["dataset"]["name"]


def perturbation_engine(version, name):
    """A perturbation job's engine param: the package's engine version for a built-in;
    for a plugin's, that and the digest of the plugin's source, so that editing it reruns
    exactly its jobs (docs/extending.md)."""
    digest = plugins.digest_of(perturbations.entry(name).origin)
    return version if digest is None else canonical({"engine": version, "plugin": digest})


SHARDS = shard_bytes(config["storage"])
MODELS = list(config["models"])
# With missing_weights: skip, stylize and sentence rewrites whose weights are not here are
# left out, each with its reason (listed at start, in the summary and in the report).
SKIPPED_WEIGHTS = missing_weights(config)
CORRUPTIONS = [c for c in config["corruptions"] if c not in SKIPPED_WEIGHTS]
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
SENTENCE = [n for n in config["text"]["sentence"] if n not in SKIPPED_WEIGHTS]
if not CORRUPTIONS and not TEXT:
    sys.exit(
        "config error at missing_weights: the VRE suite needs image corruptions or text "
        f"perturbations, and with {', '.join(SKIPPED_WEIGHTS) or 'WordNet'} skipped none is left"
    )
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
# VQABQ asks every model each main question with its first 1, 2 and 3 basic questions
# (one more subset each, severity n): Algorithm 1 keeps 0 to 3 of them per question.
CHAIN_MODELS = list(MODELS) if BQ["vqabq"]["enabled"] else []
VQABQ_N = list(range(1, text.ranking.PER_LEVEL + 1))
BQ_LEVELS = list(range(1, config["basic_questions"]["k"] // 3 + 1))
# SwapMix context perturbations (scenes datasets): one subset each, severity = the index
# of a question's swap of that kind.
CONTEXT = list(config["context"]["perturbations"])
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
    for name, reason in SKIPPED_WEIGHTS.items():
        print(f"Skipping {name} (missing_weights: skip): {reason}")
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


def corruption_severities(name):
    """The configured severities a corruption has (a one-level corruption runs at 1)."""
    return [s for s in SEVERITIES if s <= max_severity(name)]


def get_question_sets(name):
    """The perturbed question sets of one text perturbation or ranker, by severity."""
    levels = BQ_LEVELS if name in RANKERS else [1] if name in SENTENCE else SEVERITIES
    return expand(
        "results/{dataset}/questions/{name}/{level}.parquet",
        dataset=DATASET,
        name=name,
        level=levels,
    )
