"""Dataset adapters: each writes the questions table and image shards of DESIGN.md."""

from __future__ import annotations

from vqarobust.datasets.easy_vqa import prepare_easy_vqa
from vqarobust.datasets.question_types import question_type
from vqarobust.registry import Registry

ADAPTERS: Registry = Registry("dataset adapter")
ADAPTERS.register("easy-vqa")(prepare_easy_vqa)

__all__ = ["ADAPTERS", "prepare_dataset", "prepare_easy_vqa", "question_type"]


def prepare_dataset(adapter: str, **kwargs: object) -> dict[str, int]:
    """Run the named adapter; returns counts of what it wrote."""
    return ADAPTERS.create(adapter, **kwargs)
