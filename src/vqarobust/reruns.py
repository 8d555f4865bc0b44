"""What reruns when a setting changes: the invalidation matrix.

Every job of the workflow is a *stage*: a rule, or ``analyze:<name>`` for each registered
analysis. A stage declares the config keys its ``params`` (or its input and output file
lists) are made from, and the stages whose files it reads. A key's dependents are the
stages that read it and everything downstream of them; Snakemake reruns exactly those,
because every setting reaches its job through ``params`` or an input file. Keys in
:data:`RUNTIME` travel in the runtime channel (:mod:`vqarobust.runtime`) or are
scheduler hints: they rerun nothing, each with the test that shows it changes no output.

``tests/test_reruns.py`` changes every leaf of the config schema on small study configs
and checks that the jobs Snakemake plans to rerun are exactly the declared dependents;
docs/workflow.md shows the table (:func:`matrix_markdown`, kept current by a test).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqarobust.analyses.base import OPTION_KEYS, RunOptions
from vqarobust.analyses.registry import ANALYSES
from vqarobust.config_keys import STYLIZE
from vqarobust.models import model_no_rerun_keys
from vqarobust.models.keys import BATCH, DOWNLOAD
from vqarobust.params import NoRerun


@dataclass(frozen=True)
class Stage:
    """A job kind: the config keys it reads and the stages whose outputs it reads."""

    reads: tuple[str, ...] = ()
    after: tuple[str, ...] = ()


_DATASET = ("dataset", "seed")
# Which subsets exist comes from the stages that make them (corrupt_images,
# perturb_questions, ...); run_model reads only how many severities each has (a context
# subset's: every swap index of its question set, an input).
_LEVELS = ("severities", "basic_questions.k")
# The scenes generator's seed and split (the train split's for training, the evaluated
# one's for the swaps; feature extraction has a job of each).
_SCENES = ("dataset.scene_seed", "dataset.split", "dataset.train_split")
_TRAIN_SCENES = ("dataset.scene_seed", "dataset.train_split")
_EVAL_SCENES = ("dataset.scene_seed", "dataset.split")
_ANSWERS = ("models",)  # less the runtime keys (RUNTIME) and train (through train_model)

# The rules other than analyze, in the order of the data flow. Each rule's ``after`` is
# what its jobs read in Snakemake's job graphs of the study configs of tests/test_reruns.py,
# no more and no less (test_the_declared_rule_order_is_the_job_graphs).
RULES: dict[str, Stage] = {
    "prepare_dataset": Stage(_DATASET),
    "train_detector": Stage(
        ("features.*", "seed", "threads.train", *_TRAIN_SCENES), ("prepare_dataset",)
    ),
    "extract_features": Stage(
        (
            "features.*",
            "context.word_vectors",
            "context.donors",
            "dataset.adapter",
            "dataset.scene_graphs",
            *_SCENES,
        ),
        ("prepare_dataset", "train_detector"),
    ),
    "train_model": Stage(
        (
            "models.*.train",
            "models.*.features",
            "threads.train",
            "context.threshold",
            "context.class_attributes",
            "context.attribute_swaps",
            "context.word_vectors",
            *_TRAIN_SCENES,
        ),
        ("prepare_dataset", "extract_features"),
    ),
    # The boxes the box-aware corruptions keep: scene graphs, COCO instances, GQA graphs.
    "object_boxes": Stage(
        (
            "context.instances",
            "dataset.adapter",
            "dataset.questions",
            "dataset.scene_graphs",
            *_EVAL_SCENES,
        ),
        ("prepare_dataset",),
    ),
    "corrupt_images": Stage(
        (
            "seed",
            "corruptions",
            "controls",
            "severities",
            STYLIZE,
            "geometric.border",
            "storage.image_format",
            "storage.jpeg_quality",
            "ssim.window",
        ),
        ("prepare_dataset", "object_boxes"),
    ),
    "extract_image_features": Stage(("features.*",), ("corrupt_images", "train_detector")),
    "score_lpips": Stage(("lpips",), ("prepare_dataset", "corrupt_images")),
    "swap_context": Stage(
        (
            "seed",
            "context.perturbations",
            "context.k",
            "context.max_objects",
            "context.min_area",
            "context.instances",
            "dataset.images",
            "storage.image_format",
            "storage.jpeg_quality",
            *_EVAL_SCENES,
        ),
        ("prepare_dataset",),
    ),
    "swap_features": Stage(
        (
            "seed",
            "context.perturbations",
            "context.k",
            "context.threshold",
            "context.class_attributes",
            "context.attribute_swaps",
            "context.max_objects",
            "context.word_vectors",
            "features.*.kind",
            "dataset.questions",
            "dataset.scene_graphs",
            *_EVAL_SCENES,
        ),
        ("prepare_dataset", "extract_features"),
    ),
    "perturb_questions": Stage(
        (
            "seed",
            "severities",
            "text.perturbations",
            "text.min_similarity",
            "text.max_tries",
            "text.on_low_similarity",
            "text.similarity_encoder",
            "text.filter_levels",
            "text.word_share",
            "text.char_share",
            "text.char_min_length",
        ),
        ("prepare_dataset",),
    ),
    # missing_weights only removes jobs: it reruns the analyses (their skipped list).
    # A rewrite's fidelity filter too, and a sampled rewrite's seed (a greedy one has none).
    "rewrite_questions": Stage(
        (
            "text.sentence",
            "seed",
            "text.min_similarity",
            "text.max_tries",
            "text.on_low_similarity",
            "text.similarity_encoder",
            "text.filter_levels",
        ),
        ("prepare_dataset",),
    ),
    "embed_questions": Stage(("basic_questions.encoder",), ("prepare_dataset",)),
    "embed_pool": Stage(
        ("basic_questions.encoder", "basic_questions.pool", "basic_questions.pool_files"),
        ("prepare_dataset",),
    ),
    "rank_basic_questions": Stage(
        (
            "basic_questions.rankers",
            "basic_questions.datasets",
            "basic_questions.k",
            "basic_questions.lasso",
            "basic_questions.lasso_alpha",
            "basic_questions.prefilter",
            "basic_questions.exclude_main",
            "basic_questions.bleu_smoothing",
        ),
        ("prepare_dataset", "embed_questions", "embed_pool"),
    ),
    "export_basic_questions": Stage(
        ("basic_questions.rankers", "basic_questions.datasets"),
        ("prepare_dataset", "rank_basic_questions"),
    ),
    "noise_questions": Stage(("basic_questions.k",), ("prepare_dataset", "rank_basic_questions")),
    # A generative family's chain prompt, every other family's concatenation.
    "chain_questions": Stage(
        (
            "models.*.chain_prompt",
            "models.*.family",
            "basic_questions.vqabq.enabled",
            "basic_questions.vqabq.ranker",
        ),
        ("prepare_dataset", "rank_basic_questions"),
    ),
    # A per-model job's outputs are its model's subsets: skipping a perturbation
    # (missing_weights) changes them. inference_jobs cuts the jobs another way. Either
    # way each job reruns, answering what it already answered from its chunks. A
    # per-model job also draws its model's attention maps (image_attention draws them
    # with per-subset jobs), so their settings rerun it, and everything its predictions
    # feed: the price of one weight load per model.
    "run_model": Stage(
        (
            *_ANSWERS,
            *_LEVELS,
            "inference_jobs",
            "missing_weights",
            "seed",
            "diagnostics.attention.n",
        ),
        (
            "prepare_dataset",
            "train_model",
            "corrupt_images",
            "extract_features",
            "extract_image_features",
            "swap_context",
            "swap_features",
            "perturb_questions",
            "rewrite_questions",
            "noise_questions",
            "chain_questions",
        ),
    ),
    # Per-subset inference's attention jobs (inference_jobs makes or removes them).
    "image_attention": Stage(
        (
            *_ANSWERS,
            "seed",
            "corruptions",
            "severities",
            "diagnostics.attention.n",
            "inference_jobs",
        ),
        ("prepare_dataset", "train_model", "corrupt_images"),
    ),
}

# The stages that make the files of each input group an analysis declares
# (rules/analyze_inputs.smk, INPUT_GROUPS).
INPUT_SOURCES: dict[str, tuple[str, ...]] = {
    "questions": ("prepare_dataset",),
    "info": ("prepare_dataset",),
    "predictions": ("run_model",),
    "question_sets": (
        "perturb_questions",
        "rewrite_questions",
        "noise_questions",
        "chain_questions",
    ),
    "images": ("prepare_dataset", "corrupt_images"),
    "lpips": ("score_lpips",),
    "attention": ("run_model", "image_attention"),
    "context": ("prepare_dataset", "swap_context", "swap_features"),
    "vqabq_rankings": ("rank_basic_questions",),
}

# Keys that rerun nothing. Scheduler hints only reach a job's resources; runtime keys
# travel in vqarobust.runtime.Runtime, which Snakemake leaves out of its params check.
# A model entry's are its family's to declare (vqarobust.models.keys).
RUNTIME: dict[str, NoRerun] = {
    "study": NoRerun(
        "the study's label: it only refuses a merge into the default config",
        "tests/test_workflow.py::test_a_shipped_study_is_never_merged_into_the_default",
    ),
    "storage.shard_mb": NoRerun(
        "how images are cut into Parquet shards; the images and their order are the same",
        "tests/test_materialize_images.py::test_corrupted_subset_does_not_depend_on_shard_layout",
    ),
    "storage.named_files": NoRerun(
        "only whether the workflow checks, before any job, that the files the config names "
        "reach a cloud executor's jobs; no job reads it",
        "tests/cluster/test_cloud_profiles.py::test_files_the_config_names_must_reach_the_jobs",
    ),
    "threads.infer": BATCH,
    "plugins": NoRerun(
        "loading a module reruns no job (one that registers an analysis adds that analysis's "
        "job, and the DuckDB file and report that gather every analysis); a job that runs a "
        "plugin's code carries the digest of its source, so an edit reruns exactly those "
        "(docs/extending.md)",
        "tests/test_reruns.py::test_each_key_reruns_exactly_its_declared_dependents",
    ),
    "text.sentence.*.allow_download": DOWNLOAD,
    "text.sentence.*.batch_size": NoRerun(
        "rewrites are the same in any batch (padding is masked)",
        "tests/test_sentence.py::test_sentence_rewrites_do_not_depend_on_the_batch",
    ),
    "basic_questions.allow_download": DOWNLOAD,
    **{f"models.*.{key}": why for key, why in model_no_rerun_keys().items()},
    "resources.throughput": NoRerun(
        "the run_model jobs' runtime requests (a scheduler hint), never read by the job's code",
        "tests/test_gpu_hours.py::test_runtime_requests_come_from_the_table",
    ),
    "resources.runtime_margin": NoRerun(
        "the run_model jobs' runtime requests (a scheduler hint), never read by the job's code",
        "tests/test_gpu_hours.py::test_runtime_requests_come_from_the_table",
    ),
}


# Keys that reach only some jobs of a stage: an entry's own jobs (by the wildcard that
# names it), and one split's preparation.
_NAMED = {"models": "model", "features": "feature", "text.sentence": "sentence"}
_SPLIT = {
    "dataset.split": "eval",
    "dataset.n_images": "eval",
    "dataset.manifest": "eval",
    "dataset.train_split": "train",
    "dataset.train_n_images": "train",
}


def scope(path: str) -> dict[str, str]:
    """The wildcard values of the jobs a concrete key (``models.vilt.dtype``) reaches
    among its stages' jobs; a job without that wildcard is reached whole."""
    out = {"split": _SPLIT[path]} if path in _SPLIT else {}
    for prefix, wildcard in _NAMED.items():
        rest = path.removeprefix(prefix + ".")
        if rest != path and "." in rest:
            out[wildcard] = rest.split(".", 1)[0]
    return out


def matches(pattern: str, key: str) -> bool:
    """Whether ``pattern`` names ``key``: equal, or a prefix of it at a dot."""
    p, k = pattern.split("."), key.split(".")
    return k[: len(p)] == p


class _Recorder:
    """RunOptions that notes which of its fields are read."""

    def __init__(self) -> None:
        self.read: set[str] = set()

    def __getattr__(self, name: str) -> Any:
        self.read.add(name)
        return getattr(RunOptions(), name)


def analysis_reads(name: str) -> tuple[str, ...]:
    """The config keys analysis ``name`` reads: those of the run options its settings
    and its ``active`` test read (:data:`vqarobust.analyses.base.OPTION_KEYS`)."""
    analysis = ANALYSES[name]
    recorder = _Recorder()
    analysis.settings(recorder)  # type: ignore[arg-type]
    analysis.active(recorder)  # type: ignore[arg-type]
    return tuple(sorted({key for f in recorder.read for key in OPTION_KEYS[f]}))


def stages() -> dict[str, Stage]:
    """Every stage: the rules, one ``analyze:<name>`` per registered analysis, the
    assembly of the DuckDB file and the report."""
    out = dict(RULES)
    for name, a in ANALYSES.items():
        after = {s for g in a.inputs for s in INPUT_SOURCES[g]}
        after |= {f"analyze:{r}" for r in a.requires}
        out[f"analyze:{name}"] = Stage(analysis_reads(name), tuple(sorted(after)))
    analyses = tuple(f"analyze:{n}" for n in ANALYSES)
    out["load_duckdb"] = Stage(("seed",), ("prepare_dataset", "run_model", *analyses))
    out["render_report"] = Stage((), ("load_duckdb",))
    return out


def runtime_entry(key: str) -> NoRerun | None:
    """The runtime entry of ``key`` (or of a key above it), if any."""
    return next((v for p, v in RUNTIME.items() if matches(p, key)), None)


def readers(key: str, graph: Mapping[str, Stage] | None = None) -> list[str]:
    """The stages whose params or file lists ``key`` is read into (none for a key of
    the runtime channel)."""
    if runtime_entry(key) is not None:
        return []
    graph = graph or stages()
    return [name for name, s in graph.items() if any(matches(p, key) for p in s.reads)]


def downstream(names: Iterable[str], graph: Mapping[str, Stage] | None = None) -> list[str]:
    """``names`` and every stage that reads their outputs, transitively, in stage order."""
    graph = graph or stages()
    hit = set(names)
    changed = True
    while changed:
        changed = False
        for name, s in graph.items():
            if name not in hit and hit & set(s.after):
                hit.add(name)
                changed = True
    return [n for n in graph if n in hit]


def dependents(key: str, graph: Mapping[str, Stage] | None = None) -> list[str]:
    """The stages that rerun when ``key`` changes (empty for a runtime key)."""
    graph = graph or stages()
    return downstream(readers(key, graph), graph)


def schema_leaves(schema: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Every leaf key of the config schema, dotted; ``*`` stands for a name of a
    mapping of named entries (models, feature sources)."""
    leaves: list[str] = []
    for name, node in schema.get("properties", {}).items():
        key = f"{prefix}{name}"
        extra = node.get("additionalProperties")
        if "properties" in node:
            leaves += schema_leaves(node, f"{key}.")
        elif isinstance(extra, dict) and "properties" in extra:
            leaves += schema_leaves(extra, f"{key}.*.")
        else:
            leaves.append(key)
    return leaves


def _compact(names: list[str]) -> str:
    """Stage names for the docs, the analyses folded into one entry."""
    if len(names) == len(stages()):
        return "every job"
    analyses = [n.split(":", 1)[1] for n in names if n.startswith("analyze:")]
    rules = [n for n in names if not n.startswith("analyze:")]
    if analyses:
        left = [n for n in ANALYSES if n not in analyses]
        label = (
            "every analysis"
            if not left
            else f"every analysis but {', '.join(left)}"
            if len(left) <= 3
            else ", ".join(analyses)
        )
        at = next((i for i, n in enumerate(rules) if n == "load_duckdb"), len(rules))
        rules.insert(at, f"analyze ({label})")
    return ", ".join(rules)


def matrix_rows(schema: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    """(key, the stages that read it, every stage that reruns) for every schema leaf."""
    graph = stages()
    rows = []
    for key in schema_leaves(schema):
        entry = runtime_entry(key)
        if entry is not None:
            rows.append((key, "-", f"nothing: {entry.reason} (`{entry.test}`)"))
        else:
            rows.append((key, _compact(readers(key, graph)), _compact(dependents(key, graph))))
    return rows


MARKERS = ("<!-- invalidation matrix: start -->", "<!-- invalidation matrix: end -->")


def matrix_markdown(schema: Mapping[str, Any]) -> str:
    """The invalidation matrix as a Markdown table (docs/workflow.md)."""
    lines = ["| Config key | Read by | Reruns when changed |", "|---|---|---|"]
    lines += [f"| `{k}` | {r} | {v} |" for k, r, v in matrix_rows(schema)]
    return "\n".join(lines) + "\n"


def update_docs(path: str | Path, schema: Mapping[str, Any]) -> bool:
    """Write the current matrix between the markers of ``path``; True if it changed."""
    text = Path(path).read_text(encoding="utf-8")
    start, end = (text.index(m) for m in MARKERS)
    new = text[: start + len(MARKERS[0])] + "\n" + matrix_markdown(schema) + text[end:]
    Path(path).write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    # python -m vqarobust.reruns [docs/workflow.md]: print the matrix, or update the docs.
    import sys

    from vqarobust.config import load_schema

    if len(sys.argv) > 1:
        print("updated" if update_docs(sys.argv[1], load_schema()) else "current")
    else:
        print(matrix_markdown(load_schema()), end="")
