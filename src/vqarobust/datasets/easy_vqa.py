"""Adapter for easy-VQA (PyPI ``easy-vqa``): 64x64 shape images shipped inside the wheel.

easy-VQA has one answer per question. The questions table repeats it ten times, as if
ten annotators agreed, so that VQA accuracy (docs/metrics.md) is defined (each
leave-one-out subset keeps nine matches) and equals exact-match accuracy.
"""

from __future__ import annotations

from vqarobust.datasets.prepare import Dataset
from vqarobust.datasets.question_types import single_answer_questions
from vqarobust.datasets.sources import PathImages

SPLITS = ("train", "test")


def _load_split(split: str) -> tuple[list[str], list[str], list[int], dict[int, str]]:
    import easy_vqa

    if split == "train":
        qs, answers, image_ids = easy_vqa.get_train_questions()
        paths = easy_vqa.get_train_image_paths()
    elif split == "test":
        qs, answers, image_ids = easy_vqa.get_test_questions()
        paths = easy_vqa.get_test_image_paths()
    else:
        raise ValueError(f"easy-vqa has splits {SPLITS}, not {split!r}")
    return list(qs), list(answers), [int(i) for i in image_ids], dict(paths)


def read_easy_vqa(split: str = "test") -> Dataset:
    """One split of easy-VQA as a questions table and its image files.

    Question ids are the position of the question in the split, so they stay stable
    whatever subset is drawn.
    """
    qs, answers, image_ids, paths = _load_split(split)
    questions = single_answer_questions(range(len(qs)), image_ids, qs, answers)
    from vqarobust.provenance import package_version

    # The data ships in the wheel: its version identifies it.
    describe = {
        "adapter": "easy-vqa",
        "split": split,
        "package": f"easy-vqa {package_version('easy-vqa')}",
    }
    return Dataset(questions, PathImages(paths), describe)
