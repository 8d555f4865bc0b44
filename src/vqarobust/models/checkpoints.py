"""Reference checkpoints that ship with the project, and the manifest that identifies them.

The default study evaluates checkpoints frozen from a run of ``config/reference-models.yaml``
(docs/models.md, "Reference checkpoints") instead of training its models in every run:
training is bit-reproducible only on one CPU with one thread count, inference much more
widely. :func:`freeze` copies a study's trained models into a folder beside a
``manifest.json`` that holds each file's SHA-256, the training recipe, the commit and
machine that trained them and their clean and blank-image accuracy from that study's
results; :func:`verify` compares a folder with its manifest.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb

from vqarobust import store
from vqarobust.digests import file_sha256, text_sha256, tree_sha256
from vqarobust.params import canonical

MANIFEST = "manifest.json"


def _files(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): file_sha256(p)
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


def _run_info(database: str | os.PathLike[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """The run's provenance keys and each model's clean and blank-image accuracy."""
    with duckdb.connect(str(database), read_only=True) as con:
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        rows = con.execute(
            "SELECT model, clean_accuracy, control_accuracy, ratio FROM image_reliance "
            "WHERE control = 'blank'"
        ).fetchall()
        n = con.execute(
            "SELECT count(*) FROM predictions WHERE perturbation = 'clean' AND model = ?",
            [rows[0][0]] if rows else [""],
        ).fetchone()[0]
    accuracy = {m: {"clean": c, "blank": b, "blank_ratio": r, "questions": n}
                for m, c, b, r in rows}  # fmt: skip
    return info, accuracy


def freeze(
    models_dir: str | os.PathLike[str],
    names: Sequence[str],
    out_dir: str | os.PathLike[str],
    config: Mapping[str, Any],
    config_path: str,
    database: str | os.PathLike[str],
) -> dict[str, Any]:
    """Copy the trained models ``names`` of ``models_dir`` into ``out_dir`` and write its
    manifest; returns the manifest.

    ``config`` is the study config that trained them (``config_path`` is how the manifest
    names it) and ``database`` that study's results: a model it holds no clean and
    blank-image accuracy for is an error, as is one without a ``train`` section."""
    info, accuracy = _run_info(database)
    out = Path(out_dir)
    manifest: dict[str, Any] = {
        "trained_by": {
            "config": config_path,
            "config_sha256": text_sha256(json.dumps(canonical(dict(config)), sort_keys=True)),
            "git_commit": json.loads(info.get("provenance.git_commit", "null")),
            "git_dirty": json.loads(info.get("provenance.git_dirty", "null")),
            "versions": {
                k.removeprefix("provenance.version."): v
                for k, v in info.items()
                if k.startswith("provenance.version.")
            },  # fmt: skip
            "dataset": config["dataset"]["name"],
        },
        "models": {},
    }
    out.mkdir(parents=True, exist_ok=True)
    for name in names:
        entry = config["models"].get(name) or {}
        if "train" not in entry:
            raise ValueError(f"model {name!r} has no train section in {config_path}")
        if name not in accuracy:
            raise ValueError(f"{database} holds no blank-image accuracy of {name!r}: run the "
                             "study with the blank control first")  # fmt: skip
        source = Path(models_dir) / name
        if not source.is_dir():
            raise FileNotFoundError(f"no trained model {name!r} at {source}")
        with store.atomic_path(out / name) as tmp:
            shutil.copytree(source, tmp)
        recipe = dict(entry["train"], threads=config["threads"]["train"])
        manifest["models"][name] = {
            "family": entry.get("family", "vqa-classifier"),
            "recipe": canonical(recipe),
            "sha256": tree_sha256(out / name),
            "files": _files(out / name),
            "accuracy": accuracy[name],
            "trained_on": json.loads(info.get(f"provenance.model.{name}", "{}")).get("machines"),
        }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return manifest


def verify(folder: str | os.PathLike[str]) -> list[str]:
    """What differs between the checkpoints in ``folder`` and its manifest (missing,
    changed or unlisted files, by path); empty when every file matches."""
    root = Path(folder)
    path = root / MANIFEST
    if not path.is_file():
        return [f"{path}: no manifest"]
    problems = []
    for name, model in json.loads(path.read_text())["models"].items():
        have = _files(root / name) if (root / name).is_dir() else {}
        for rel, digest in sorted(model["files"].items()):
            if rel not in have:
                problems.append(f"{name}/{rel}: missing")
            elif have[rel] != digest:
                problems.append(f"{name}/{rel}: SHA-256 {have[rel]} is not the manifest's")
        unlisted = sorted(set(have) - set(model["files"]))
        problems += [f"{name}/{rel}: not in the manifest" for rel in unlisted]
    return problems
