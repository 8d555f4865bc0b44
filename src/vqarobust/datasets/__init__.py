"""Dataset adapters: each writes the questions table and image shards of docs/workflow.md.

Adapters are registered with the source files they read (config keys under
``dataset:``, which become job inputs) and their default number of images.
"""

from __future__ import annotations

import os
from typing import Any

from vqarobust.datasets.easy_vqa import read_easy_vqa
from vqarobust.datasets.gqa import open_gqa
from vqarobust.datasets.hf import open_hf
from vqarobust.datasets.jsonl import open_jsonl
from vqarobust.datasets.prepare import Dataset, PreparedOutputs, write_prepared
from vqarobust.datasets.question_types import answer_type, question_type
from vqarobust.datasets.scenes import read_scenes
from vqarobust.datasets.vqav2 import open_vqav2
from vqarobust.registry import Registry

# Each adapter opens its source as a Dataset; tags: the config keys it reads as files
# (job inputs; those in ``optional`` may be left out), its default number of images,
# and whether it has named splits.
ADAPTERS: Registry = Registry("dataset adapter")
ADAPTERS.register("easy-vqa", sources=(), default_n_images=200, splits=True)(read_easy_vqa)
ADAPTERS.register(
    "vqav2", sources=("questions", "annotations", "images"), default_n_images=3000, splits=False
)(open_vqav2)
# GQA: images optional (only pixel models read them; feature models read features).
ADAPTERS.register(
    "gqa",
    sources=("questions", "scene_graphs", "images"),
    optional=("images",),
    default_n_images=None,
    splits=False,
)(open_gqa)
ADAPTERS.register("jsonl", sources=("path",), default_n_images=None, splits=False)(open_jsonl)
ADAPTERS.register("scenes", sources=(), default_n_images=500, splits=True, options=("scene_seed",))(
    read_scenes
)
# path: a local folder (a job input) or, with download, a hub id (a parameter).
ADAPTERS.register(
    "hf",
    sources=("path",),
    default_n_images=None,
    splits=True,
    options=("columns", "download"),
    remote=("path",),
)(open_hf)

# dataset keys that only some adapters read; validation rejects them elsewhere.
SOURCE_KEYS = ("questions", "annotations", "images", "path", "scene_graphs")

__all__ = [
    "ADAPTERS",
    "PreparedOutputs",
    "SOURCE_KEYS",
    "answer_type",
    "dataset_job",
    "prepare_dataset",
    "question_type",
]


def prepare_dataset(
    adapter: str,
    out: PreparedOutputs,
    *,
    n_images: int | None = None,
    seed: int = 0,
    manifest: str | None = None,
    on_bad_image: str = "fail",
    **source: Any,
) -> dict[str, Any]:
    """Open a dataset with the named adapter (``source``: its keys, e.g. ``split`` or
    ``questions``/``annotations``/``images``) and write the prepared outputs to ``out``.

    ``n_images`` None takes every image. Returns counts of what was written.
    """
    from vqarobust.provenance import source_digests

    dataset: Dataset = ADAPTERS.create(adapter, **source)
    # Provenance: which source files (by content) the prepared split was made from.
    describe = {**dataset.describe, "sources": source_digests(source)}
    with dataset.images:
        return write_prepared(
            dataset.questions,
            dataset.images,
            out,
            n_images=n_images,
            seed=seed,
            manifest=manifest,
            on_bad_image=on_bad_image,
            describe=describe,
        )


def dataset_job(dataset: dict[str, Any], split: str, seed: int) -> tuple[dict, dict]:
    """(input files, parameters) of the job that prepares ``split`` (``eval`` or ``train``).

    Parameters hold only what changes the prepared data, with sorted keys, so that a
    rerun is triggered by a change of content, never by key order.
    """
    tags = ADAPTERS.entry(dataset["adapter"]).tags
    inputs = {key: dataset[key] for key in tags["sources"] if dataset.get(key)}
    params: dict[str, Any] = {"seed": seed, "on_bad_image": dataset["on_bad_image"]}
    for key in tags.get("remote", ()):
        # A hub id to download is no file of this machine: a parameter, not an input.
        if dataset.get("download") and not os.path.exists(inputs[key]):
            params[key] = inputs.pop(key)
    # Settings the adapter itself reads (e.g. the scenes generator's seed).
    params.update({k: dataset[k] for k in tags.get("options", ()) if k in dataset})
    if split == "train":
        params.update(split=dataset["train_split"], n_images=dataset["train_n_images"])
    else:
        if tags["splits"]:
            params["split"] = dataset["split"]
        if dataset.get("manifest"):
            inputs["manifest"] = dataset["manifest"]
        else:
            params["n_images"] = dataset["n_images"]
    return inputs, dict(sorted(params.items()))
