"""The export stage of the study plan: rules/export.smk's ``export_huggingface``, which
writes every subset of the run as one Hugging Face dataset with lmms-eval tasks
(:mod:`vqarobust.hf_export`), on demand (``snakemake hf_dataset``)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan


class ExportStage:
    """What ``export_huggingface`` reads and what its card says."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan

    @functools.cached_property
    def _entries(self) -> dict[str, Any]:
        from vqarobust.hf_export import plan_entries

        return plan_entries(self.plan)

    def entries(self, wildcards: Any) -> dict[str, Any]:
        """The subsets to export and those left out (:func:`~vqarobust.hf_export.
        plan_entries`)."""
        return self._entries

    def facts(self, wildcards: Any) -> dict[str, Any]:
        """What the card says (:func:`~vqarobust.hf_card.card_facts`): a change reruns
        the export."""
        from vqarobust.hf_card import card_facts

        return card_facts(self.plan)

    def export_input(self, wildcards: Any) -> dict[str, Any]:
        """The questions, the prepared split's description, and every image folder and
        question set of the exported subsets."""
        plan = self.plan
        files = []
        for entry in self._entries["subsets"]:
            if "question_set" in entry:
                files += [entry["images"], entry["question_set"]]
            for _, images, questions in entry.get("levels", []):
                files += [images] + ([questions] if questions else [])
        return {
            "questions": plan.questions,
            "info": f"resources/datasets/{plan.dataset}/eval/dataset.json",
            "subsets": list(dict.fromkeys(files)),
        }
