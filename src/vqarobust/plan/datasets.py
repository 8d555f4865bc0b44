"""The datasets stage of the study plan: the input files and params of
rules/datasets.smk (``prepare_dataset``), one job per split."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vqarobust.datasets import dataset_job

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan


class DatasetsStage:
    """What ``prepare_dataset`` reads and what changes its output, per split."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config

    def _job(self, split: str) -> tuple[dict, dict]:
        # Not cached: dataset_job looks at this machine (is a hub id a local file?),
        # so each call sees the files as they are then, as the rule files' did.
        return dataset_job(self.config["dataset"], split, self.config["seed"])

    def dataset_input(self, wildcards: Any) -> dict[str, Any]:
        """The source files of one split; the config names them, so they are relative to
        the working directory (plan.user_path)."""
        inputs = self._job(wildcards.split)[0]
        return {key: self.plan.user_path(path) for key, path in inputs.items()}

    def dataset_params(self, wildcards: Any) -> dict[str, Any]:
        """What changes one split's prepared data (sorted keys: order never reruns it)."""
        return self._job(wildcards.split)[1]
