"""The models stage: input functions and params of rules/models.smk, and what every job
of a model (run_model, image_attention) reads of its entry."""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vqarobust.models import family_code_digest
from vqarobust.models.memory import check_estimable, entry_gpu_memory_gb
from vqarobust.params import answer_spec, canonical, runtime_options
from vqarobust.runtime import Runtime

if TYPE_CHECKING:
    from vqarobust.plan.study import StudyPlan


class ModelsStage:
    """Training a model, and the settings every job of a model takes from its entry."""

    def __init__(self, plan: StudyPlan) -> None:
        self.plan = plan
        self.config = plan.config
        # GB of GPU memory per model: an ``auto`` estimate reads the cached checkpoint,
        # so it is made once per model, not once per job.
        self._gpu_memory: dict[str, int] = {}
        # GPU-seconds per (model, subset) from resources.throughput, read once.
        self._cells: dict[str, dict[str, float | None]] | None = None
        # Cores each concurrent GPU job may hold in a local run (--cores over --resources
        # gpu=N, set by rules/common.smk); None where nothing is shared (:func:`cores_per_gpu`).
        self.cores_per_gpu: int | None = None
        # An estimate that would need a checkpoint's own code fails the plan, before any
        # job: the scheduler runs none (docs/models.md, "GPU memory from the config").
        for name, entry in self.config["models"].items():
            if entry.get("device") != "cpu":
                check_estimable(name, entry)

    def _entry(self, model: str) -> Any:
        return self.config["models"][model]

    def train_input(self, wildcards: Any) -> dict[str, str]:
        """The training split's questions and its images, or the model's feature table."""
        dataset = self.plan.dataset
        inputs = {"questions": f"resources/datasets/{dataset}/train/questions.parquet"}
        source = self.plan.feature_models.get(wildcards.model)
        if source is None:
            inputs["images"] = f"resources/datasets/{dataset}/train/images"
        else:
            inputs["features"] = self.plan.features.feature_path(source, "train")
            inputs.update(self.plan.features.word_vectors_input(wildcards))
        return inputs

    def train_params(self, wildcards: Any) -> Any:
        """The model's training settings (canonical): a change retrains it."""
        # The thread count is a setting of training: its sums, so its weights, depend on it.
        train = dict(self._entry(wildcards.model)["train"], threads=self.config["threads"]["train"])
        if train.get("swapmix"):
            # SwapMix re-renders the training scenes (or swaps their feature rows): which
            # ones depends on these.
            dataset = self.config["dataset"]
            train.update(scene_seed=dataset.get("scene_seed", 0), split=dataset["train_split"])
            source = self.plan.feature_models.get(wildcards.model)
            if source is not None:
                features = self.plan.features
                context = self.config["context"]
                train.update(
                    swap_mode=features.swap_mode(source),
                    word_vectors=features.word_vectors_identity(),
                    threshold=context["threshold"],
                    class_attributes=context["class_attributes"],
                    attribute_swaps=context["attribute_swaps"],
                )
        return canonical(train)

    def model_dir(self, model: str) -> str | None:
        """Checkpoint directory the workflow trains, or None for an external model."""
        if "train" in self._entry(model):
            return f"resources/models/{self.plan.dataset}/{model}"
        return None

    def model_input(self, model: str) -> dict[str, Any]:
        """The checkpoint folder as a job input: the one the workflow trains, or a local
        folder the entry names (so that weights replaced in place rerun the model's jobs;
        inside a job the resume fingerprint then compares their content)."""
        trained = self.model_dir(model)
        if trained is not None:
            return {"model": trained}
        path = self._entry(model).get("path_or_id")
        return {"model": self.plan.user_path(path)} if path and os.path.isdir(path) else {}

    def model_spec(self, wildcards: Any) -> Any:
        """What can change the model's answers (canonical); runtime settings stay out."""
        entry = dict(self._entry(wildcards.model))
        trained = self.model_dir(wildcards.model)
        if trained is not None:
            entry["path_or_id"] = trained
        return answer_spec(entry)

    def model_code(self, wildcards: Any) -> str | None:
        """The digest of the code that computes the model's answers (its family's adapter
        and inference.py): an edit to it reruns the model's jobs."""
        return family_code_digest(self._entry(wildcards.model)["family"])

    def model_runtime_options(self, wildcards: Any) -> Runtime:
        """Batch size and the like: the runtime channel (they never change an answer)."""
        return Runtime(runtime_options(self._entry(wildcards.model)))

    def served_resources(self) -> dict[str, Callable[[Any], int]]:
        """One resource per served model, ``served_<name>``: a job of that model holds its
        ``max_concurrency`` of it, any other job none. ``--resources served_<name>=N``
        then keeps the requests in flight at that server to N across parallel jobs."""
        out = {}
        for name, entry in self.config["models"].items():
            if entry["family"] == "openai-chat":
                slots = int(entry.get("max_concurrency", 8))
                out[served_resource(name)] = functools.partial(_slots, name, slots)
        return out

    def model_gpus(self, wildcards: Any) -> int:
        """GPUs a job of the model requests: none on the CPU, else one."""
        return 0 if self._entry(wildcards.model)["device"] == "cpu" else 1

    def model_threads(self, wildcards: Any) -> int:
        """CPU threads of a job of the model: ``threads.infer``, for a GPU job at most its
        share of the run's cores (:func:`gpu_job_threads`)."""
        threads = self.config["threads"]["infer"]
        return (
            gpu_job_threads(threads, self.cores_per_gpu) if self.model_gpus(wildcards) else threads
        )

    def attention_threads(self, wildcards: Any) -> int:
        """CPU threads of a model's attention job: on the CPU one, since it maps one request
        at a time, which a second thread does not speed up (docs/performance.md), so the
        other core runs another job; a GPU job's as :meth:`model_threads`."""
        return self.model_threads(wildcards) if self.model_gpus(wildcards) else 1

    def model_gpu_model(self, wildcards: Any) -> str:
        """The GPU model a GPU job asks the scheduler for ("" for any, or on the CPU)."""
        entry = self._entry(wildcards.model)
        return entry.get("gpu_model", "") if self.model_gpus(wildcards) else ""

    def model_gpu_memory(self, wildcards: Any) -> int:
        """GB of GPU memory a GPU job of the model requests (0 on the CPU or when unknown):
        the entry's gpu_memory_gb, or its estimate from the cached checkpoint (auto), once
        per model."""
        model = wildcards.model
        if not self.model_gpus(wildcards):
            return 0
        if model not in self._gpu_memory:
            self._gpu_memory[model] = entry_gpu_memory_gb(model, self._entry(model)) or 0
        return self._gpu_memory[model]

    def model_mem_mb(self, wildcards: Any) -> int:
        """MB of memory a job of the model requests (the entry's mem_mb)."""
        return self._entry(wildcards.model)["mem_mb"]

    def model_runtime(self, wildcards: Any) -> int:
        """Minutes a run_model job may run: with ``resources.throughput``, the job's
        GPU time estimated from that table times ``resources.runtime_margin`` (at least
        :data:`vqarobust.throughput.RUNTIME_FLOOR`), where the table measured the model
        and the target's questions are known; else the entry's fixed ``runtime``."""
        from vqarobust.throughput import RUNTIME_FLOOR, runtime_minutes

        cells = self._estimated_cells().get(wildcards.model)
        subsets = self.plan.infer.job_subsets(wildcards)
        if cells is None or any(cells.get(s) is None for s in subsets):
            return self._entry(wildcards.model)["runtime"]
        seconds = sum(cells[s] or 0.0 for s in subsets)
        margin = self.config["resources"]["runtime_margin"]
        return runtime_minutes(seconds, margin, RUNTIME_FLOOR)

    def _estimated_cells(self) -> dict[str, dict[str, float | None]]:
        """GPU-seconds per (model, subset) from the config's throughput table (made once;
        empty without a table, or when the target's questions are unknown): the cells
        ``vqarobust gpu-hours`` prints the sums of."""
        if self._cells is None:
            self._cells = {}
            path = self.config["resources"]["throughput"]
            if path is not None:
                from vqarobust.cost_estimate import questions_from
                from vqarobust.gpu_hours import from_table
                from vqarobust.throughput import read_table

                table = read_table(self.plan.user_path(path))
                try:
                    n, _ = questions_from(self.plan, None, table.questions_per_image, "the table's")
                except ValueError:
                    return self._cells  # no n_images, nothing prepared: the fixed runtime
                for p in from_table(self.plan, table, n):
                    if p.unknown is None and p.source is not None:
                        self._cells[p.model] = p.cells
        return self._cells


def cores_per_gpu(cores: int | None, gpus: int | None) -> int | None:
    """The cores each of ``gpus`` GPU jobs may hold so that all of them fit in ``cores`` at
    once (at least 1), or None where there is nothing to share: no ``--resources gpu=N``,
    or no core count (a cluster run, where every job gets cores of its own)."""
    if not cores or not gpus:
        return None
    return max(1, cores // gpus)


def gpu_job_threads(threads: int, share: int | None) -> int:
    """A GPU job's threads: the configured ones, at most ``share`` (:func:`cores_per_gpu`).
    Otherwise ``--cores 8 --resources gpu=4`` with 4 threads a job would run two GPU jobs
    and leave two GPUs idle: the cores would bind before the GPUs. The thread count
    changes no answer (it reaches only torch.set_num_threads, never a param)."""
    return threads if share is None else min(threads, share)


def served_resource(model: str) -> str:
    """The Snakemake resource of a served model's requests in flight."""
    return "served_" + re.sub(r"\W", "_", model)


def _slots(model: str, slots: int, wildcards: Any) -> int:
    return slots if wildcards.model == model else 0
