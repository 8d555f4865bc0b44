"""Where a results database came from: code, environment, config, data, weights, time.

:func:`collect` gathers the ``provenance.*`` keys that :func:`vqarobust.db.build_database`
writes into ``run_info``; :func:`read` reads them back and :func:`diff` says which inputs
and which tables differ between two databases (``vqarobust provenance`` and
``vqarobust diff``). Every digest is a SHA-256 (:mod:`vqarobust.digests`); a key ending in
``listing_sha256`` covers file names and sizes only (image folders too large to read).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from vqarobust import store
from vqarobust.costs import MEASURED_TABLES
from vqarobust.digests import file_sha256, listing_sha256, text_sha256
from vqarobust.environment import host, lock_record
from vqarobust.models.checkpoints import reference_record
from vqarobust.params import canonical
from vqarobust.sql import identifier

PREFIX = "provenance."
PACKAGES = ("vqarobust", "torch", "transformers", "snakemake", "duckdb", "polars")


def package_version(package: str) -> str:
    """The installed version of ``package`` from its metadata, or ``not installed``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "not installed"


def code_identity(source: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The git commit of the checkout ``source`` (default: this package's folder) lies in,
    and whether it differs from that commit: tracked changes or untracked files (a new
    module not yet added counts; ignored files do not). ``None`` for both outside a
    checkout."""
    where = Path(source) if source is not None else Path(__file__).resolve().parent

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(where), *args],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None, "git_dirty": None}
    status = git("status", "--porcelain", "--untracked-files=normal")
    return {"git_commit": commit, "git_dirty": bool(status)}


def package_identity(name: str = "vqarobust") -> dict[str, Any]:
    """What code of package ``name`` ran: ``editable`` (its distribution's
    ``direct_url.json``), ``location`` (the folder it is imported from), ``sha256`` over
    its files (relative path and content) and, for an editable install, the commit and
    dirty state of the checkout its source lies in.

    Installed from a wheel, the files are the distribution's own list (its ``RECORD``),
    read as they are now; editable, the list names no source file, so the digest covers
    the imported folder's files (``__pycache__`` left out). Either way a module changed
    or added after the install changes the digest."""
    from importlib import import_module

    folder = Path(import_module(name).__file__).resolve().parent
    dist, editable = _distribution(name, folder)
    if dist is not None and not editable and dist.files:
        files = sorted(
            (f.as_posix(), Path(dist.locate_file(f)))
            for f in dist.files
            if f.parts and f.parts[0] == name and f.suffix != ".pyc"
        )
    else:
        files = sorted(
            (p.relative_to(folder.parent).as_posix(), p)
            for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts
        )
    digest = text_sha256("".join(f"{rel}\0{file_sha256(path)}\n" for rel, path in files))
    out: dict[str, Any] = {
        "editable": editable,
        "location": str(folder),
        "sha256": digest,
        "files": len(files),
    }
    if editable:
        out.update(code_identity(folder))
    return out


def _distribution(name: str, folder: Path) -> tuple[Any, bool | None]:
    """The installed distribution of ``name`` that the code in ``folder`` comes from, and
    whether it is editable; ``(None, None)`` when none is. Several can be on the path (a
    venv's own and one reached through ``PYTHONPATH``): the one whose files hold the
    imported ``__init__.py``, else an editable one whose source folder holds it."""
    from importlib.metadata import distributions

    found = list(distributions(name=name))
    for dist in found:
        init = next((f for f in dist.files or [] if f.as_posix() == f"{name}/__init__.py"), None)
        if init is not None and Path(dist.locate_file(init)).resolve() == folder / "__init__.py":
            return dist, False
    for dist in found:
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        source = Path(direct.get("url", "").removeprefix("file://")).resolve()
        if direct.get("dir_info", {}).get("editable") and folder.is_relative_to(source):
            return dist, True
    return None, None


def source_digests(sources: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """Digests of a dataset's source files: a file by its bytes, a folder by its listing."""
    out: dict[str, dict[str, str]] = {}
    for key, value in sorted(sources.items()):
        if not isinstance(value, str | os.PathLike) or not Path(value).exists():
            continue
        path = Path(value)
        if path.is_dir():
            out[key] = {"path": str(path), "listing_sha256": listing_sha256(path)}
        else:
            out[key] = {"path": str(path), "sha256": file_sha256(path)}
    return out


def prediction_records(paths: Sequence[str | os.PathLike[str]]) -> list[dict[str, Any]]:
    """The input fingerprint and times each prediction file carries (files without one,
    written by other code, are skipped: their provenance is unknown and :func:`collect`
    counts them)."""
    records = []
    for path in paths:
        meta = pq.read_schema(path).metadata or {}
        if store.INPUTS_KEY in meta:
            records.append(json.loads(meta[store.INPUTS_KEY]))
    return records


def _iso(seconds: float) -> str:
    return dt.datetime.fromtimestamp(seconds, dt.UTC).isoformat(timespec="seconds")


def collect(
    *,
    config: Mapping[str, Any] | None,
    prediction_paths: Sequence[str | os.PathLike[str]],
    dataset_files: Mapping[str, str | os.PathLike[str]],
    dataset_info: Mapping[str, Any],
    seed: int,
    workflow_dir: str | os.PathLike[str] | None = None,
    plugin_records: Sequence[Mapping[str, Any]] = (),
) -> dict[str, str]:
    """The ``provenance.*`` run_info keys (values as strings, JSON where structured).

    ``dataset_files`` are the prepared files the tables were computed from (questions,
    manifest); ``dataset_info`` the prepared dataset's ``dataset.json`` (its ``sources``
    digests, made when the dataset was prepared). Models: one key per model with the
    checkpoint identity its predictions carry and, for a model the workflow trained, the
    SHA-256 of its ``train`` settings. ``plugin_records``: the loaded plugins
    (:func:`vqarobust.plugins.records`).
    """
    info: dict[str, Any] = {"version": package_version("vqarobust")}
    # The workflow's own checkout (rules, scripts, configs), then the package that ran.
    info.update(
        code_identity(workflow_dir)
        if workflow_dir is not None
        else {"git_commit": None, "git_dirty": None}
    )
    info["workflow_dir"] = str(workflow_dir) if workflow_dir is not None else None
    info["package"] = package_identity()
    info["python"] = platform.python_version()
    # The versions against the checkout's lock, and the machine that assembled the tables
    # (each model's inference machines, with torch's kernel level and threads, are under
    # its model key).
    info["lock"] = lock_record(workflow_dir)
    info["machine"] = host()
    for package in PACKAGES[1:]:
        info[f"version.{package}"] = package_version(package)
    # The plugins the process loaded (docs/extending.md), given by the caller: importing
    # vqarobust.plugins here would put it in the code digest of every analysis.
    info["plugins"] = list(plugin_records)
    resolved = json.dumps(canonical(dict(config)), sort_keys=True) if config else None
    info["config_sha256"] = text_sha256(resolved) if resolved else "no config given"
    info["seed"] = seed
    for key, path in sorted(dataset_files.items()):
        info[f"dataset.{key}.sha256"] = file_sha256(path)
    for key, digest in sorted((dataset_info.get("sources") or {}).items()):
        info[f"dataset.source.{key}"] = digest
    records = prediction_records(prediction_paths)
    info["prediction_files"] = len(prediction_paths)
    info["prediction_files_without_fingerprint"] = len(prediction_paths) - len(records)
    models: dict[str, dict[str, Any]] = {}
    for record in records:
        inputs = record["inputs"]
        precision = inputs.get("precision", "not recorded")
        entry = models.setdefault(
            inputs["model"],
            {"checkpoint": inputs["checkpoint"], "precision": precision, "machines": []},
        )
        # The machine of the job that merged the file (chunks it resumed may come from
        # another; their key holds the device and dtype, not the CPU).
        ran_on = record.get("machine", "not recorded")
        if ran_on not in entry["machines"]:
            entry["machines"].append(ran_on)
        if entry["checkpoint"] != inputs["checkpoint"]:
            # Two jobs of one model saw different weights: the tables mix two models.
            entry["conflict"] = "prediction files of this model were made with other weights"
        elif entry["precision"] != precision:
            entry["conflict"] = (
                "prediction files of this model were computed on other devices or in other dtypes"
            )
    for name, entry in models.items():
        train = ((config or {}).get("models") or {}).get(name, {}).get("train")
        if train:
            entry["train_sha256"] = text_sha256(json.dumps(canonical(train), sort_keys=True))
        local = (entry["checkpoint"] or {}).get("path_or_id") or {}
        if "sha256" in local:
            reference = reference_record(local["path"], local["sha256"])
            if reference is not None:
                entry["reference"] = reference
        info[f"model.{name}"] = entry
    if records:
        info["started"] = _iso(min(r["started"] for r in records))
    info["finished"] = _iso(dt.datetime.now(dt.UTC).timestamp())
    return {
        PREFIX + k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
        for k, v in info.items()
    }


def read(db_path: str | os.PathLike[str]) -> dict[str, str]:
    """The provenance keys of a database's run_info (without the prefix)."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        rows = con.execute(
            "SELECT key, value FROM run_info WHERE starts_with(key, ?) ORDER BY key", [PREFIX]
        ).fetchall()
    if not rows:
        raise ValueError(f"{db_path}: run_info holds no provenance (written before it existed?)")
    return {k.removeprefix(PREFIX): v for k, v in rows}


# Keys that differ between any two runs and say nothing about their inputs.
_TIMES = frozenset({"started", "finished"})


def diff(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> dict[str, Any]:
    """What differs between two databases: ``inputs`` (provenance key -> (a, b)), and per
    table present in both whether its rows differ (``tables``: name -> a sentence), plus
    the tables only one of them has."""
    pa_, pb = read(a), read(b)
    inputs = {
        k: (pa_.get(k), pb.get(k))
        for k in sorted(set(pa_) | set(pb))
        if k not in _TIMES and pa_.get(k) != pb.get(k)
    }
    with duckdb.connect() as con:
        con.execute("ATTACH ? AS a (READ_ONLY)", [str(a)])
        con.execute("ATTACH ? AS b (READ_ONLY)", [str(b)])
        names = {
            side: {
                r[0]
                for r in con.execute(
                    "SELECT table_name FROM duckdb_tables() WHERE database_name = ?", [side]
                ).fetchall()
            }
            for side in ("a", "b")
        }
        tables = {}
        for name in sorted(names["a"] & names["b"] - {"run_info"} - MEASURED_TABLES):
            sentence = _table_difference(con, name)
            if sentence:
                tables[name] = sentence
    return {
        "inputs": inputs,
        "tables": tables,
        "only_in_a": sorted(names["a"] - names["b"]),
        "only_in_b": sorted(names["b"] - names["a"]),
    }


def _table_difference(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """None when ``a.name`` and ``b.name`` hold the same rows (as multisets), else what
    differs."""
    # The name comes out of a file: quoted as an identifier, never pasted.
    table = identifier(name)
    cols = {
        side: [r[0] for r in con.execute(f"DESCRIBE {side}.{table}").fetchall()]
        for side in ("a", "b")
    }
    if cols["a"] != cols["b"]:
        return f"columns differ: {cols['a']} vs {cols['b']}"
    n = {
        side: con.execute(f"SELECT count(*) FROM {side}.{table}").fetchone()[0]
        for side in ("a", "b")
    }
    only = {
        side: con.execute(
            f"SELECT count(*) FROM (SELECT * FROM {side}.{table} EXCEPT ALL "
            f"SELECT * FROM {other}.{table})"
        ).fetchone()[0]
        for side, other in (("a", "b"), ("b", "a"))
    }
    if not only["a"] and not only["b"]:
        return None
    return f"{n['a']} vs {n['b']} rows; {only['a']} rows only in A, {only['b']} only in B"


def format_provenance(info: Mapping[str, str]) -> str:
    """``key: value`` lines, one per provenance key."""
    return "\n".join(f"{k}: {v}" for k, v in info.items()) + "\n"


def format_diff(
    result: Mapping[str, Any], a: str | os.PathLike[str], b: str | os.PathLike[str]
) -> str:
    """The result of :func:`diff` as lines a reader scans: inputs first, then tables."""
    lines = [f"A = {a}", f"B = {b}"]
    if not result["inputs"]:
        lines.append("inputs: the same (times aside)")
    else:
        lines.append(f"inputs that differ ({len(result['inputs'])}):")
        for key, (va, vb) in result["inputs"].items():
            lines += [f"  {key}", f"    A: {va}", f"    B: {vb}"]
    if not result["tables"] and not result["only_in_a"] and not result["only_in_b"]:
        lines.append("tables: all the same")
    else:
        lines.append(f"tables that differ ({len(result['tables'])}):")
        lines += [f"  {name}: {sentence}" for name, sentence in result["tables"].items()]
        for side in ("a", "b"):
            if result[f"only_in_{side}"]:
                lines.append(f"only in {side.upper()}: {', '.join(result[f'only_in_{side}'])}")
    return "\n".join(lines) + "\n"
