"""Task functions of the lmms-eval tasks over a vqarobust dataset export.

``vqarobust hf-export`` copies this file as ``utils.py`` beside the task YAMLs
(:mod:`vqarobust.lmms_tasks`); lmms-eval loads it from there, so it imports nothing of
vqarobust. The prompt is lmms-eval's VQAv2 prompt (the question, then "Answer the
question using a single word or phrase."). The score is lmms-eval's VQAv2 accuracy with
its own answer processor (EvalAI's punctuation, digit and article rules): the mean over
the ten human answers of min(1, matches among the other nine / 3). docs/interop.md says
how it differs from the official metric vqarobust scores with.

Each sample's ``vqarobust_sample`` metric holds the question id, image id,
perturbation, modality and severity of the row, so that lmms-eval's sample log
(``--log_samples``, which drops the document itself) names the subset and question.
"""

from __future__ import annotations

from typing import Any

POST_PROMPT = "\nAnswer the question using a single word or phrase."
IDENTITY = ("question_id", "image_id", "perturbation", "modality", "severity")


def vqarobust_doc_to_visual(doc: dict[str, Any]) -> list[Any]:
    """The row's image, as RGB."""
    return [doc["image"].convert("RGB")]


def vqarobust_doc_to_text(
    doc: dict[str, Any], lmms_eval_specific_kwargs: dict[str, Any] | None = None
) -> str:
    """The question between the task's (or the model's) pre- and post-prompt."""
    kwargs = lmms_eval_specific_kwargs or {}
    return f"{kwargs.get('pre_prompt', '')}{doc['question']}{kwargs.get('post_prompt', '')}"


def vqa_score(answer: str, answers: list[str], clean: Any) -> float:
    """lmms-eval's VQAv2 accuracy of ``answer``: each human answer left out in turn,
    min(1, matches among the others / 3), averaged; ``clean`` normalizes a string."""
    given = clean(answer)
    truths = [clean(a) for a in answers]
    if not truths:
        return 0.0
    scores = []
    for left_out in range(len(truths)):
        matches = sum(t == given for i, t in enumerate(truths) if i != left_out)
        scores.append(min(1.0, matches / 3))
    return sum(scores) / len(scores)


def _evalai_clean() -> Any:
    """lmms-eval's VQAv2 answer normalization (imported from lmms-eval, where it runs)."""
    from lmms_eval.tasks._task_utils.vqa_eval_metric import EvalAIAnswerProcessor

    processor = EvalAIAnswerProcessor()

    def clean(text: str) -> str:
        text = text.replace("\n", " ").replace("\t", " ").strip()
        return processor.process_digit_article(processor.process_punctuation(text))

    return clean


def vqarobust_process_results(doc: dict[str, Any], results: list[str]) -> dict[str, Any]:
    """The sample's score (``exact_match``, as lmms-eval's vqav2_val names its VQA
    accuracy) and its identity (``vqarobust_sample``)."""
    answer = results[0]
    sample = {key: doc[key] for key in IDENTITY} | {"answer": answer}
    return {
        "exact_match": vqa_score(answer, list(doc["answers"]), _evalai_clean()),
        "vqarobust_sample": sample,
    }


def vqarobust_count(items: list[Any]) -> int:
    """The aggregate of ``vqarobust_sample``: how many samples were scored."""
    return len(items)
