"""A VQA v1 (Antol et al. 2015) question-file miniature: the questions of
:func:`vqarobust.datasets.miniature.write_question_pool` rewritten in v1's layout, as
the basic-question paper's pool was.

What makes it v1 rather than VQAv2: the official names without ``v2_``
(``OpenEnded_mscoco_train2014_questions.json``, ``mscoco_train2014_annotations.json``),
the header (``info.version`` 1.0, ``task_type`` Open-Ended or Multiple-Choice), v1's
question ids (image id x 10 + n) and, for the multiple-choice task, 18
``multiple_choices`` per question.
"""

from __future__ import annotations

import json
from pathlib import Path

from vqarobust.datasets.miniature import write_question_pool

TASK_TYPES = {"OpenEnded": "Open-Ended", "MultipleChoice": "Multiple-Choice"}
_ANSWERS = {"yes/no": "yes", "number": "2", "other": "red"}


def write_v1_pool(
    folder: str | Path, split: str, n: int, seed: int, task: str = "OpenEnded"
) -> dict[str, Path]:
    """The v1 questions file of ``task`` and the annotations file of ``split`` under
    ``folder`` (official names), holding the same questions as ``write_question_pool``
    (split, n, seed) writes in VQAv2's layout. Returns ``questions`` and ``annotations``."""
    folder = Path(folder)
    v2 = write_question_pool(folder / "v2-source", split, n=n, seed=seed)
    questions = json.loads(v2["questions"].read_text())["questions"]
    notes = {a["question_id"]: a for a in json.loads(v2["annotations"].read_text())["annotations"]}
    info = {"description": "This is v1.0 of the VQA dataset.", "version": "1.0", "year": 2015}
    seen: dict[int, int] = {}
    v1_questions, v1_notes = [], []
    for q in questions:
        n_of_image = seen[q["image_id"]] = seen.get(q["image_id"], -1) + 1
        qid = q["image_id"] * 10 + n_of_image  # v1's ids: three questions per image
        entry = {"image_id": q["image_id"], "question": q["question"], "question_id": qid}
        if task == "MultipleChoice":
            entry["multiple_choices"] = ["yes", "no", "2", "red", *(f"c{i}" for i in range(14))]
        v1_questions.append(entry)
        kind = notes[q["question_id"]]["answer_type"]
        answer = _ANSWERS[kind]
        answers = [
            {"answer": answer, "answer_confidence": "yes", "answer_id": i} for i in range(1, 11)
        ]
        v1_notes.append(
            {
                "question_id": qid,
                "image_id": q["image_id"],
                "answer_type": kind,
                "question_type": notes[q["question_id"]]["question_type"],
                "multiple_choice_answer": answer,
                "answers": answers,
            }
        )
    paths = {
        "questions": folder / f"{task}_mscoco_{split}_questions.json",
        "annotations": folder / f"mscoco_{split}_annotations.json",
    }
    header = {"info": info, "data_type": "mscoco", "data_subtype": split, "license": {}}
    paths["questions"].write_text(
        json.dumps({**header, "task_type": TASK_TYPES[task], "questions": v1_questions})
    )
    paths["annotations"].write_text(json.dumps({**header, "annotations": v1_notes}))
    return paths
