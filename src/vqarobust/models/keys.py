"""The keys of a model entry, as each family declares them.

A family declares, where it is registered (the ``keys`` tag of
:data:`vqarobust.models.FAMILIES`), every key an entry of it may hold and what each can
change. From these declarations come the config check (a key the family does not read
fails at validation), the adapter's arguments (:func:`vqarobust.models.load_model`), the
params that rerun a model's jobs (:func:`vqarobust.params.answer_spec`), the runtime
channel (:func:`vqarobust.params.runtime_options`) and the model keys of the invalidation
matrix's ``RUNTIME`` (:mod:`vqarobust.reruns`). The groups below are the shared ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vqarobust.params import NoRerun


@dataclass(frozen=True)
class Keyed:
    """An adapter option in the runtime channel of which one part keys the answers: the
    params hold ``by(value)`` under the name ``into``."""

    into: str
    by: Callable[[Any], Any]


def _frozen(keys: Iterable[str]) -> frozenset[str]:
    return frozenset(keys)


@dataclass(frozen=True)
class FamilyKeys:
    """The keys an entry of a family may hold. ``answers`` and ``runtime`` are the
    adapter's arguments: the first can change an answer (they reach the params), the
    second only how fast or how it runs (the runtime channel), each with why and the test
    that shows it. ``reads`` and ``hints`` the adapter never gets: the workflow reads the
    first (they reach the params), the scheduler the second."""

    answers: frozenset[str] = frozenset()
    runtime: Mapping[str, NoRerun | Keyed] = field(default_factory=dict)
    reads: frozenset[str] = frozenset()
    hints: Mapping[str, NoRerun] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("answers", "reads"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))

    def __or__(self, other: FamilyKeys) -> FamilyKeys:
        return FamilyKeys(
            self.answers | other.answers,
            {**self.runtime, **other.runtime},
            self.reads | other.reads,
            {**self.hints, **other.hints},
        )

    @property
    def known(self) -> frozenset[str]:
        """Every key an entry of the family may hold."""
        return self.answers | set(self.runtime) | self.reads | set(self.hints)

    @property
    def adapter(self) -> frozenset[str]:
        """The keys the adapter's factory receives."""
        return self.answers | set(self.runtime)

    @property
    def no_rerun(self) -> dict[str, NoRerun]:
        """The keys that change no answer, each with why."""
        plain = {k: v for k, v in self.runtime.items() if isinstance(v, NoRerun)}
        return {**plain, **self.hints}

    @property
    def derived(self) -> frozenset[str]:
        """Names the params add for :class:`Keyed` options (never config keys)."""
        return frozenset(v.into for v in self.runtime.values() if isinstance(v, Keyed))


_SCHEDULER = "a scheduler hint (the job's resources), never read by the job's code"
_SLURM = "tests/cluster/test_slurm.py"
BATCH = NoRerun(
    "answers are the same in any batch (padding is masked; the batch halves on OOM)",
    "tests/test_inference.py::test_classifier_answers_do_not_depend_on_batch_or_threads",
)
DOWNLOAD = NoRerun(
    "whether missing files may be fetched; the files' identity is what is compared",
    "tests/test_reruns.py::test_runtime_keys_reach_no_params",
)

# Every entry's, whatever its family declares: which family and where from; the device
# its job runs on; the scheduler's requests.
ENTRY = FamilyKeys(
    reads={"family", "from_repository", "device"},
    hints={
        "gpu_memory_gb": NoRerun(
            "a GPU job's resource request (docs/models.md)",
            "tests/test_reruns.py::test_runtime_keys_reach_no_params",
        ),
        "mem_mb": NoRerun(_SCHEDULER, _SLURM),
        "runtime": NoRerun(_SCHEDULER, _SLURM),
        "gpu_model": NoRerun(_SCHEDULER, _SLURM),
    },
)
# A checkpoint on the Hub or in a folder, loaded in this process.
CHECKPOINT = FamilyKeys(
    answers={"path_or_id", "revision", "dtype", "trust_remote_code"},
    runtime={"batch_size": BATCH, "allow_download": DOWNLOAD},
)
SAFETENSORS = FamilyKeys(answers={"use_safetensors"})
# A reference model the workflow trains (an architecture of vqarobust.models.architectures
# for the family): the trained checkpoint stands for the block in the params.
TRAINED = FamilyKeys(reads={"train"})
# Each distinct image encoded once per chunk of questions.
SHARED_FEATURES = FamilyKeys(
    runtime={
        "share_image_features": NoRerun(
            "each image is encoded once for all its questions instead of once per question, "
            "to the same answers (PNP-VQA's test; every chat architecture's: "
            "tests/test_vlm_architectures.py::"
            "test_shared_image_features_answer_as_the_plain_path); in bfloat16 on a GPU the "
            "encoder sees other batches, which moves its features by rounding only, as a "
            "batch size does",
            "tests/test_pnp_vqa.py::test_pipeline_answers_a_batch_seeded_per_item",
        )
    }
)
# A family that generates its answer from a text input: VQABQ asks it a chain of
# questions, worded by the entry's chain_prompt (the others get them concatenated).
GENERATIVE = FamilyKeys(answers={"max_new_tokens"}, reads={"chain_prompt"})
# A chat family's user prompt.
PROMPT = FamilyKeys(answers={"prompt"})
# A family that reads region features (the entry's ``features`` source), not pixels.
REGION_FEATURES = FamilyKeys(reads={"features"})


def _endpoint(url: str) -> str:
    from vqarobust.models.endpoint import endpoint_host

    return endpoint_host(url)


_SERVED = NoRerun(
    "how the server is reached and how hard it is pushed; the answers come from the "
    "served model, where it is served and its seed",
    "tests/test_served.py::test_a_served_model_asks_for_no_gpu_and_its_key_reruns_nothing",
)
# A model behind an OpenAI-compatible server: another server may serve another model
# under the same name, so where it is served keys the answers (the base_url's host,
# ``endpoint``), credentials and all else of the URL do not; served_revision is the
# user's label of the weights behind the name.
SERVED = FamilyKeys(
    answers={"model", "seed", "retry_filtered"},
    runtime={
        "batch_size": BATCH,
        "base_url": Keyed("endpoint", _endpoint),
        **dict.fromkeys(
            ("api_key_env", "max_concurrency", "adaptive_concurrency", "timeout_s"), _SERVED
        ),
        "max_retries": _SERVED,
        "request_budget": NoRerun(
            "how many requests a job may send: a job past it stops, a finished one answered "
            "every request",
            "tests/test_served.py::test_a_request_budget_stops_the_job_and_a_rerun_goes_on",
        ),
    },
    reads={"served_revision"},
)

# A family registered without a ``keys`` tag (a plugin's): a checkpoint's keys, the ones
# docs/extending.md says its factory receives.
UNDECLARED = CHECKPOINT


def no_rerun_keys(declarations: Mapping[str, FamilyKeys]) -> dict[str, NoRerun]:
    """The keys that change no answer over families' declarations (by family name). A
    key is one or the other for every family that reads it: the invalidation matrix has
    one row per key."""
    out: dict[str, NoRerun] = {}
    answers: dict[str, str] = {}
    runtime: dict[str, str] = {}
    for family, keys in declarations.items():
        out.update(keys.no_rerun)
        runtime.update(dict.fromkeys(keys.no_rerun, family))
        answers.update(dict.fromkeys(keys.known - set(keys.no_rerun), family))
    both = sorted(set(answers) & set(runtime))
    if both:
        pairs = ", ".join(f"{k} (runtime-only in {runtime[k]}, not in {answers[k]})" for k in both)
        raise ValueError(f"model keys declared runtime-only by one family only: {pairs}")
    return out
