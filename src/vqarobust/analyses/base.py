"""The shape every analysis shares: its settings, its inputs, its tables on disk.

An analysis (docs/architecture.md) is a module with one :class:`Analysis` object: a name,
the analyses whose tables it reads (``requires``), the workflow file groups it reads
(``inputs``), the tables it writes (documented in docs/workflow.md), a function that
builds its frozen settings from the run's :class:`RunOptions` (and nothing else), and a
function from :class:`Inputs` and those settings to :class:`Result`. The workflow runs
each as its own job (rule ``analyze``) writing Parquet under
``results/{dataset}/tables/{analysis}/``; :func:`vqarobust.db.build_database` runs them
in one process. Both go through :func:`run_analysis` and :func:`write_result`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow.parquet as pq

from vqarobust import store
from vqarobust.config_keys import STYLIZE
from vqarobust.params import canonical

MANIFEST = "_analysis.json"
# Tables whose name starts with this stay beside an analysis's tables for the analyses
# that read them (the scored rows with every column), and out of the DuckDB file.
PRIVATE = "_"


@dataclass(frozen=True)
class RunOptions:
    """Every setting any analysis reads, resolved once from the config (or given by a
    caller of :func:`vqarobust.db.build_database`). Each analysis keeps only its part."""

    metric: str = "vqa_accuracy"
    weights: Mapping[str, float] | None = None
    families: Mapping[str, str] = field(default_factory=dict)
    rscore: Mapping[str, float] = field(default_factory=dict)
    seed: int = 0
    skipped: Mapping[str, str] = field(default_factory=dict)
    image_subsets: Sequence[tuple[str, int]] = ()
    outside: Sequence[str] = ()
    uncertainty: Mapping[str, Any] = field(default_factory=dict)
    on_missing: str = "error"
    vqabq: Mapping[str, Any] = field(default_factory=dict)
    models: Mapping[str, Mapping[str, Any]] | None = None
    features: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    context: Sequence[str] = ()
    reliance_k: Sequence[int] = ()
    feature_sources: Sequence[str] = ()
    rankers: Mapping[str, str] = field(default_factory=dict)
    flip_questions: str = "flip_answers"
    on_failed_answers: str = "fail"
    max_unanswered_share: float = 0.01
    dropped_questions: str = "every_table"
    prices: Mapping[str, Any] = field(default_factory=dict)


# The config keys each option is resolved from (rules/analyze_inputs.smk builds the
# options): an analysis reads a key when its settings or its ``active`` test read an
# option made from it. A prefix names its whole subtree, ``*`` any model or feature name.
OPTION_KEYS: dict[str, tuple[str, ...]] = {
    "metric": ("scoring.metric",),
    "weights": ("vre.preferences",),
    # With missing_weights: skip, the lists exclude what is skipped; every analysis
    # reads scoring's table of what was skipped (below), which declares those keys.
    "families": (
        "corruptions",
        "controls",
        "text.perturbations",
        "text.sentence",
        "basic_questions.rankers",
        "basic_questions.datasets",
    ),
    "rscore": ("rscore",),
    "seed": ("seed",),
    # Only where WordNet is absent; the suite installs it.
    "skipped": (
        "text.perturbations",
        "basic_questions.rankers",
        "basic_questions.datasets",
        "missing_weights",
        "corruptions",
        STYLIZE,
        "text.sentence",
    ),
    "image_subsets": ("corruptions", "controls", "severities", "dataset.adapter", "dataset.images"),
    "outside": ("vre.include_grayscale", "corruptions"),
    "uncertainty": ("uncertainty",),
    "on_missing": (),  # not a config key: callers of build_database
    "vqabq": ("basic_questions.vqabq",),
    "models": ("models.*.features", "models.*.train.swapmix"),
    "features": ("features.*.kind",),
    "context": ("context.perturbations",),
    "reliance_k": ("context.reliance_k", "context.k"),
    "feature_sources": (
        "features",
        "models.*.features",
        "models.*.family",
        "context.perturbations",
    ),
    # How each basic-question perturbation was ranked (LASSO's mode, BLEU's smoothing, the
    # encoder), named in the R_score tables.
    "rankers": (
        "basic_questions.rankers",
        "basic_questions.datasets",
        "basic_questions.lasso",
        "basic_questions.lasso_alpha",
        "basic_questions.prefilter",
        "basic_questions.bleu_smoothing",
        "basic_questions.exclude_main",
        "basic_questions.encoder",
    ),
    # How questions a horizontal flip changes are scored (vqarobust.metrics.flip).
    "flip_questions": ("geometric.flip_questions",),
    "on_failed_answers": ("scoring.on_failed_answers",),
    "max_unanswered_share": ("scoring.max_unanswered_share",),
    "dropped_questions": ("text.dropped_questions",),
    # What a GPU-hour, a CPU-hour and a served model's tokens cost (the costs table).
    "prices": ("prices",),
}


@dataclass(frozen=True)
class NoSettings:
    """The settings of an analysis that reads no setting (only its input files)."""

    @classmethod
    def from_options(cls, options: RunOptions) -> NoSettings:
        del options
        return cls()


@dataclass(frozen=True)
class Inputs:
    """What one analysis reads: named groups of workflow files, and the tables of the
    analyses it requires (``table(name)``)."""

    files: Mapping[str, Sequence[str]]
    table: Callable[[str], pl.DataFrame]

    def one(self, name: str) -> str | None:
        """The single file of group ``name``, or None where the group is absent."""
        paths = self.files.get(name) or []
        return str(paths[0]) if paths else None

    def many(self, name: str) -> list[str]:
        """Every file of group ``name`` (empty where absent)."""
        return [str(p) for p in self.files.get(name) or []]


@dataclass(frozen=True)
class Table:
    """A table and whether it is stored sorted by every column (``ORDER BY ALL``)."""

    frame: pl.DataFrame
    ordered: bool = False


@dataclass
class Result:
    """An analysis's tables, the warnings it wants in ``run_info.warnings`` and the
    ``run_info`` keys it describes itself by."""

    tables: dict[str, Table | pl.DataFrame] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    info: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Analysis:
    """One registered analysis (module doc)."""

    name: str
    doc: str
    tables: Mapping[str, str]
    settings_type: type
    run: Callable[[Inputs, Any], Result]
    requires: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    active: Callable[[RunOptions], bool] = lambda options: True

    def settings(self, options: RunOptions) -> Any:
        """The frozen settings object of this analysis, from the run's options."""
        return self.settings_type.from_options(options)

    def settings_from_params(self, params: Mapping[str, Any]) -> Any:
        """The settings object back from its params (:func:`settings_params`)."""
        return self.settings_type(**dict(params))

    @property
    def module(self) -> str:
        """The module that defines the analysis (its code digest starts there)."""
        return self.run.__module__


def settings_params(settings: Any) -> dict[str, Any]:
    """A settings object as Snakemake params: canonical JSON-like values, so that only a
    change of value (not of key order) reruns the job."""
    return canonical(json.loads(json.dumps(dataclasses.asdict(settings))))


def _arrow(table: Table) -> Any:
    """The table as DuckDB stores it (its types), sorted if asked."""
    with duckdb.connect() as con:
        con.register("frame", table.frame.to_arrow())
        order = " ORDER BY ALL" if table.ordered else ""
        return con.sql(f"SELECT * FROM frame{order}").to_arrow_table()


def as_table(value: Table | pl.DataFrame) -> Table:
    """A bare frame is an unordered table."""
    return value if isinstance(value, Table) else Table(value)


def write_result(
    folder: str | os.PathLike[str], result: Result, manifest: Mapping[str, Any]
) -> None:
    """Write each table as ``<name>.parquet`` and ``_analysis.json`` (the manifest plus
    the warnings, info and row counts) into ``folder``, atomically as a whole."""
    with store.atomic_path(folder) as tmp:
        tmp.mkdir(parents=True)
        rows = {}
        for name, value in result.tables.items():
            table = as_table(value)
            frame = table.frame if name.startswith(PRIVATE) else None
            if frame is not None:
                frame.write_parquet(tmp / f"{name}.parquet")
            else:
                pq.write_table(_arrow(table), tmp / f"{name}.parquet")
            rows[name] = as_table(value).frame.height
        record = {**manifest, "warnings": result.warnings, "info": result.info, "rows": rows}
        (tmp / MANIFEST).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def read_manifest(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """The ``_analysis.json`` of an analysis's table folder."""
    return json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))


def folder_tables(folder: str | os.PathLike[str]) -> Callable[[str], pl.DataFrame]:
    """A reader of the tables in one analysis's folder, by name."""
    return lambda name: pl.read_parquet(Path(folder) / f"{name}.parquet")


@contextmanager
def quiet_warnings() -> Iterator[None]:
    """Silence Python warnings that another analysis records (the same coverage check
    runs in several analyses; only one of them reports it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
