"""Run one analysis from files and its required analyses' table folders, or every
active analysis of a run in one process (what :func:`vqarobust.db.build_database` does)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from vqarobust.analyses.assemble import assemble_database
from vqarobust.analyses.base import (
    Analysis,
    Inputs,
    RunOptions,
    settings_params,
    write_result,
)
from vqarobust.analyses.registry import ANALYSES, active
from vqarobust.plugins import module_digest


def table_reader(folders: Sequence[str | os.PathLike[str]]) -> Any:
    """A reader of tables by name from the first of ``folders`` that has one;
    ``FileNotFoundError`` where none has it."""

    def read(name: str) -> pl.DataFrame:
        for folder in folders:
            path = Path(folder) / f"{name}.parquet"
            if path.is_file():
                return pl.read_parquet(path)
        raise FileNotFoundError(f"no table {name} among {[str(f) for f in folders]}")

    return read


def run_analysis(
    analysis: Analysis,
    settings: Any,
    files: Mapping[str, Sequence[str]],
    required: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    code: str | None = None,
) -> None:
    """Run ``analysis`` and write its folder ``out`` (tables and manifest). ``code`` is
    the digest of the analysis's code that the manifest records; a workflow job passes
    the one its plan computed (its ``code`` param), since walking the import graph again
    would cost each job more than most analyses take; without it, it is computed."""
    result = analysis.run(Inputs(files, table_reader(required)), settings)
    manifest = {
        "analysis": analysis.name,
        "settings": settings_params(settings),
        "code": module_digest(analysis.module) if code is None else code,
    }
    write_result(out, result, manifest)


def run_all(
    db_path: str | os.PathLike[str],
    options: RunOptions,
    files: Mapping[str, Sequence[str]],
    config: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Every active analysis in one process, then the DuckDB file; ``files`` are the
    workflow's file groups (``questions``, ``info``, ``predictions``, ...)."""
    with tempfile.TemporaryDirectory(prefix="vqarobust-tables-") as tmp:
        folders: dict[str, Path] = {}
        for analysis in active(options):
            out = Path(tmp) / analysis.name
            required = [folders[r] for r in analysis.requires]
            run_analysis(analysis, analysis.settings(options), files, required, out)
            folders[analysis.name] = out
        dataset_files = {k: files[k][0] for k in ("questions", "info") if files.get(k)}
        return assemble_database(
            db_path,
            list(folders.values()),
            dataset_files,
            list(files.get("predictions", [])),
            options.seed,
            config,
        )


__all__ = ["ANALYSES", "run_all", "run_analysis", "table_reader"]
