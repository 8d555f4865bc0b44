"""The usual way general harnesses run a Hugging Face VQA model: one request at a time, as
the model cards do. The tests and benchmarks/inference.py compare the adapters with it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def one_at_a_time(
    family: str,
    path: str,
    images: Sequence[Any],
    questions: Sequence[str],
    max_new_tokens: int = 10,
) -> list[str]:
    """Answers of ``family`` (``vqa-classifier`` or ``blip``) at ``path``: per request the
    processor on one (image, question), then the argmax of the logits (as the ViLT model
    card) or greedy ``generate`` cut to a short answer (as the BLIP model card)."""
    import torch
    from transformers import (
        AutoModelForVisualQuestionAnswering,
        AutoProcessor,
        BlipForQuestionAnswering,
    )

    import vqarobust.models.cnn_bow  # noqa: F401  (registers the CNN+BoW with Auto)
    from vqarobust.models.postprocess import short_answer

    classes = {
        "vqa-classifier": AutoModelForVisualQuestionAnswering,
        "blip": BlipForQuestionAnswering,
    }
    processor = AutoProcessor.from_pretrained(path)
    model = classes[family].from_pretrained(path).eval()
    answers = []
    with torch.inference_mode():
        for image, question in zip(images, questions, strict=True):
            inputs = processor(images=image, text=question, return_tensors="pt")
            if family == "blip":
                out = model.generate(**inputs, max_new_tokens=max_new_tokens, do_sample=False)
                answers.append(short_answer(processor.decode(out[0], skip_special_tokens=True)))
            else:
                answers.append(model.config.id2label[int(model(**inputs).logits.argmax(-1))])
    return answers
