"""Shared fixtures: tiny prepared datasets and tiny trained models, built once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def easy_vqa_eval(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Six test-split images of easy-VQA with all their questions."""
    from vqarobust.datasets import prepare_dataset

    root = tmp_path_factory.mktemp("easy_vqa_eval")
    out = {"questions": root / "questions.parquet", "images": root / "images"}
    prepare_dataset(
        "easy-vqa",
        questions_out=out["questions"],
        images_out=out["images"],
        split="test",
        n_images=6,
        seed=0,
    )
    return out


@pytest.fixture(scope="session")
def easy_vqa_train(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Forty train-split images of easy-VQA, for a few training steps."""
    from vqarobust.datasets import prepare_dataset

    root = tmp_path_factory.mktemp("easy_vqa_train")
    out = {"questions": root / "questions.parquet", "images": root / "images"}
    prepare_dataset(
        "easy-vqa",
        questions_out=out["questions"],
        images_out=out["images"],
        split="train",
        n_images=40,
        seed=0,
    )
    return out
