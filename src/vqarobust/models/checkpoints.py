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
from vqarobust.corruptions import image_removing_controls
from vqarobust.digests import file_sha256, text_sha256, tree_sha256
from vqarobust.params import canonical

MANIFEST = "manifest.json"


def _files(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): file_sha256(p)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _run_info(database: str | os.PathLike[str]) -> tuple[dict[str, str], dict[str, Any]]:
    """The run's provenance keys and each model's clean and blank-image accuracy."""
    with duckdb.connect(str(database), read_only=True) as con:
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        # The manifest's "blank" keys hold the control that takes the image away.
        rows = con.execute(
            "SELECT model, clean_accuracy, control_accuracy, ratio FROM image_reliance "
            "WHERE list_contains(?, control) ORDER BY model, control",
            [image_removing_controls()],
        ).fetchall()
        n = con.execute(
            "SELECT count(*) FROM predictions WHERE perturbation = 'clean' AND model = ?",
            [rows[0][0]] if rows else [""],
        ).fetchone()[0]
    accuracy = {
        m: {"clean": float(c), "blank": float(b), "blank_ratio": float(r), "questions": int(n)}
        for m, c, b, r in rows
    }
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
            # Strings are stored as they are, everything else as JSON (provenance.collect).
            "git_commit": info.get("provenance.git_commit"),
            "git_dirty": json.loads(info.get("provenance.git_dirty", "null")),
            "versions": {
                k.removeprefix("provenance.version."): v
                for k, v in info.items()
                if k.startswith("provenance.version.")
            },
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
            raise ValueError(
                f"{database} holds no blank-image accuracy of {name!r}: run the "
                "study with the blank control first"
            )
        source = Path(models_dir) / name
        if not source.is_dir():
            raise FileNotFoundError(f"no trained model {name!r} at {source}")
        with store.atomic_path(out / name) as tmp:
            # Snakemake's marker of a directory output is no part of the checkpoint.
            shutil.copytree(source, tmp, ignore=shutil.ignore_patterns(".snakemake_timestamp"))
        recipe = dict(entry["train"], threads=config["threads"]["train"])
        manifest["models"][name] = {
            "family": entry.get("family", "vqa-classifier"),
            "recipe": canonical(recipe),
            "sha256": tree_sha256(out / name),
            "files": _files(out / name),
            "accuracy": accuracy[name],
            "study_machines": json.loads(info.get(f"provenance.model.{name}", "{}")).get(
                "machines"
            ),
        }
    # Atomic, like the folders: a failed freeze never leaves a torn manifest.
    with store.atomic_path(out / MANIFEST) as tmp:
        tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
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


def reference_record(path: str | os.PathLike[str], sha256: str) -> dict[str, Any] | None:
    """What the manifest beside a checkpoint folder says of it (recipe, who trained it,
    accuracy) and whether ``sha256``, the digest of the files that ran, is the manifest's;
    None when no manifest lists the folder."""
    folder = Path(path)
    manifest_path = folder.parent / MANIFEST
    if not manifest_path.is_file():
        return None
    manifest = json.loads(manifest_path.read_text())
    model = manifest.get("models", {}).get(folder.name)
    if model is None:
        return None
    return {
        "manifest": str(manifest_path),
        "matches": model["sha256"] == sha256,
        "recipe": model["recipe"],
        "accuracy": model["accuracy"],
        "trained_by": manifest["trained_by"],
    }


def reference_sentence(name: str, record: Mapping[str, Any]) -> str:
    """The report's sentence on a reference checkpoint: how it was trained and what it is
    not."""
    recipe, by = record["recipe"], record["trained_by"]
    commit = (by.get("git_commit") or "an unknown commit")[:12]
    epochs = recipe.get("epochs")
    text = (
        f"{name} is a reference checkpoint ({record['manifest']}): a {recipe['architecture']} "
        f"trained from random weights for {epochs:g} epochs on {by['dataset']}'s training "
        f"split by {by['config']} at commit {commit}, then frozen (its clean and blank-image "
        "accuracy are in the manifest and, for this run, in the tables here). A small model "
        "made to give the default study something to measure, not one of the papers' models."
    )
    if not record["matches"]:
        text += " Its files differ from the manifest's: these numbers are not of those weights."
    return text


def manifest_table(manifest: Mapping[str, Any]) -> str:
    """The checkpoints of a manifest as the Markdown table docs/models.md shows
    (``vqarobust checkpoints table``): clean and blank-image accuracy on the study's
    questions, the blank ratio, the training recipe's epochs and the digest."""
    lines = [
        "| checkpoint | clean accuracy | blank-image accuracy | blank / clean | questions | "
        "epochs (pretrain + all) | SHA-256 |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, model in sorted(manifest["models"].items()):
        acc, recipe = model["accuracy"], model["recipe"]
        pre = recipe.get("pretrain")
        epochs = f"{pre['epochs']:g} + {recipe['epochs']:g}" if pre else f"{recipe['epochs']:g}"
        lines.append(
            f"| `{name}` | {acc['clean']:.3f} | {acc['blank']:.3f} | {acc['blank_ratio']:.1%} "
            f"| {acc['questions']:,} | {epochs} | `{model['sha256'][:12]}` |"
        )
    return "\n".join(lines) + "\n"
