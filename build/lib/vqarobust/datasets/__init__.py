"""Dataset adapters: each writes the questions table and image shards of docs/workflow.md.

Adapters are registered with the source files they read (config keys under
``dataset:``, which become job inputs) and their default number of images.
"""

from __future__ import annotations

from typing import Any

from vqarobust.datasets.easy_vqa import prepare_easy_vqa
from vqarobust.datasets.jsonl import prepare_jsonl
from vqarobust.datasets.question_types import answer_type, question_type
from vqarobust.datasets.vqav2 import prepare_vqav2
from vqarobust.registry import Registry

ADAPTERS: Registry = Registry("dataset adapter")
ADAPTERS.register("easy-vqa", sources=(), default_n_images=200, splits=True)(prepare_easy_vqa)
ADAPTERS.register("vqav2", sources=("questions", "annotations", "images"),
                  default_n_images=3000, splits=False)(prepare_vqav2)  # fmt: skip
ADAPTERS.register("jsonl", sources=("path",), default_n_images=None, splits=False)(prepare_jsonl)

# dataset keys that only some adapters read; validation rejects them elsewhere.
SOURCE_KEYS = ("questions", "annotations", "images", "path")

__all__ = [
    "ADAPTERS",
    "SOURCE_KEYS",
    "answer_type",
    "dataset_job",
    "prepare_dataset",
    "question_type",
]


def prepare_dataset(adapter: str, **kwargs: Any) -> dict[str, Any]:
    """Run the named adapter; returns counts of what it wrote."""
    return ADAPTERS.create(adapter, **kwargs)


def dataset_job(dataset: dict[str, Any], split: str, seed: int) -> tuple[dict, dict]:
    """(input files, parameters) of the job that prepares ``split`` (``eval`` or ``train``).

    Parameters hold only what changes the prepared data, with sorted keys, so that a
    rerun is triggered by a change of content, never by key order.
    """
    tags = ADAPTERS.entry(dataset["adapter"]).tags
    inputs = {key: dataset[key] for key in tags["sources"]}
    params: dict[str, Any] = {"seed": seed, "on_bad_image": dataset["on_bad_image"]}
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
