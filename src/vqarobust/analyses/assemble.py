"""The DuckDB file: every analysis's tables as they are on disk, ``run_info`` and the
provenance of the run (docs/workflow.md). Nothing is computed here."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from vqarobust import plugins, store
from vqarobust.analyses.base import MANIFEST, PRIVATE, read_manifest
from vqarobust.provenance import PACKAGES, package_version
from vqarobust.provenance import collect as collect_provenance
from vqarobust.sql import identifier, literal

log = logging.getLogger(__name__)


def _plugin_records(config: Mapping[str, Any] | None) -> list[dict]:
    """The loaded plugins with the config's own modules among them (a caller of
    build_database may not have loaded those)."""
    plugins.load((config or {}).get("plugins") or [])
    return plugins.records()


# run_info's keys an analysis describes itself by, in the order the file has always had
# them (warnings sit after rscore).
_FIRST = ("metric", "weights", "rscore")


def _run_info(manifests: Sequence[Mapping[str, Any]], dataset_info: Mapping[str, Any]) -> dict:
    described = {k: v for m in manifests for k, v in m["info"].items()}
    info = {k: described.pop(k) for k in _FIRST if k in described}
    info["warnings"] = json.dumps([w for m in manifests for w in m["warnings"]])
    info.update(described)
    for package in PACKAGES:
        info[f"version.{package}"] = package_version(package)
    for key, value in dataset_info.items():
        if key != "skipped_images":
            info[f"dataset.{key}"] = value if isinstance(value, str) else json.dumps(value)
    return info


def _tables(folders: Sequence[str | os.PathLike[str]]) -> dict[str, Path]:
    tables: dict[str, Path] = {}
    for folder in folders:
        for path in sorted(Path(folder).glob("*.parquet")):
            if path.stem.startswith(PRIVATE):
                continue
            if path.stem in tables:
                raise ValueError(
                    f"table {path.stem} written by {tables[path.stem].parent} and {folder}"
                )
            tables[path.stem] = path
    return tables


def assemble_database(
    db_path: str | os.PathLike[str],
    folders: Sequence[str | os.PathLike[str]],
    dataset_files: Mapping[str, str | os.PathLike[str]],
    prediction_paths: Sequence[str | os.PathLike[str]],
    seed: int,
    config: Mapping[str, Any] | None,
    workflow_dir: str | os.PathLike[str] | None = None,
) -> dict[str, int]:
    """Write ``db_path`` atomically from the analyses' table ``folders`` (in registry
    order: their warnings keep that order); returns the row count of each table.

    ``dataset_files`` are ``questions`` and ``info`` (the prepared ``dataset.json``; its
    counts become ``dataset.*`` keys); ``config`` is only hashed into ``provenance.*``
    (:func:`vqarobust.provenance.collect`), which also records the commit and state of
    ``workflow_dir``, the workflow's checkout."""
    manifests = [read_manifest(f) for f in folders]
    info_path = dataset_files.get("info")
    dataset_info = json.loads(Path(info_path).read_text(encoding="utf-8")) if info_path else {}
    info = _run_info(manifests, dataset_info)
    files = dict(dataset_files)
    manifest = Path(info_path).with_name("manifest.txt") if info_path else None
    if manifest is not None and manifest.is_file():
        files["manifest"] = manifest
    info.update(
        collect_provenance(
            config=config,
            prediction_paths=prediction_paths,
            dataset_files=files,
            dataset_info=dataset_info,
            seed=seed,
            workflow_dir=workflow_dir,
            plugin_records=_plugin_records(config),
        )
    )
    counts: dict[str, int] = {}
    with store.atomic_path(db_path) as tmp, duckdb.connect(str(tmp)) as con:
        # Table names are the files' names: quoted, never pasted.
        for name, path in _tables(folders).items():
            con.execute(
                f"CREATE TABLE {identifier(name)} AS "
                f"SELECT * FROM read_parquet({literal(str(path))})"
            )
        con.execute(
            """CREATE VIEW image_accuracy AS
               SELECT model, perturbation, severity, n, accuracy
               FROM accuracy WHERE modality IN ('clean', 'image')"""
        )
        con.execute("CREATE TABLE run_info (key VARCHAR, value VARCHAR)")
        con.executemany("INSERT INTO run_info VALUES (?, ?)", list(info.items()))
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            counts[table] = con.execute(f"SELECT count(*) FROM {identifier(table)}").fetchone()[0]
    log.info("wrote %s: %s", Path(db_path), counts)
    return counts


__all__ = ["MANIFEST", "assemble_database"]
