"""Model repository: adapter families behind a registry, and ``load_model``.

Families are registered as factories that import their adapter lazily, so listing
names (config validation at workflow start) does not import torch or transformers. Each
declares the keys its entries may hold in its ``keys`` tag (:mod:`vqarobust.models.keys`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vqarobust.collector import imports_paused
from vqarobust.models.keys import (
    CHECKPOINT,
    ENTRY,
    GENERATIVE,
    PROMPT,
    REGION_FEATURES,
    SAFETENSORS,
    SERVED,
    SHARED_FEATURES,
    TRAINED,
    UNDECLARED,
    FamilyKeys,
    no_rerun_keys,
)
from vqarobust.registry import Registry

if TYPE_CHECKING:
    from vqarobust.models.base import VQAModel
    from vqarobust.params import NoRerun

# Questions per forward pass unless the model entry says otherwise (config.yaml's
# batch_size); the chat and PNP-VQA pipelines hold far more per question (long prompts,
# many captions), so their families start at SMALL_BATCH_SIZE (the family's
# ``batch_size`` tag, vqarobust.models.default_batch_size).
DEFAULT_BATCH_SIZE = 64
SMALL_BATCH_SIZE = 8

FAMILIES: Registry[Callable[..., VQAModel]] = Registry("model family")

# The keys an in-process checkpoint family reads (each family's ``keys`` tag adds its
# own to every entry's; vqarobust.models.keys says what each group can change).
_HF = CHECKPOINT | SAFETENSORS


# attention: whether the adapter exposes attention over the image (image_attention);
# "vilt": only a ViLT classifier does (the CNN+BoW has none).
@FAMILIES.register(
    "vqa-classifier",
    attention="vilt",
    module="vqarobust.models.classifier",
    keys=_HF | TRAINED | SHARED_FEATURES,
)
def _vqa_classifier(**kwargs: Any) -> VQAModel:
    """Answer classifiers: ViLT, the reference CNN+BoW, any AutoModelForVQA checkpoint."""
    from vqarobust.models.classifier import ClassifierVQA

    return ClassifierVQA(**kwargs)


@FAMILIES.register(
    "blip", attention=True, module="vqarobust.models.blip", keys=_HF | GENERATIVE | SHARED_FEATURES
)
def _blip(**kwargs: Any) -> VQAModel:
    """BLIP VQA (BlipForQuestionAnswering): generative answers, vision features shared."""
    from vqarobust.models.blip import BlipVQA

    return BlipVQA(**kwargs)


@FAMILIES.register(
    "llava",
    attention=True,
    module="vqarobust.models.chat",
    keys=_HF | GENERATIVE | PROMPT | SHARED_FEATURES,
)
def _llava(**kwargs: Any) -> VQAModel:
    """LLaVA (LlavaForConditionalGeneration) with the processor's chat template."""
    from vqarobust.models.chat import LlavaVQA

    return LlavaVQA(**kwargs)


@FAMILIES.register(
    "image-text-to-text",
    batch_size=SMALL_BATCH_SIZE,
    module="vqarobust.models.chat",
    keys=_HF | GENERATIVE | PROMPT | SHARED_FEATURES,
)
def _image_text_to_text(**kwargs: Any) -> VQAModel:
    """Any AutoModelForImageTextToText chat checkpoint (Qwen2-VL, SmolVLM, Idefics3, ...)."""
    from vqarobust.models.chat import ChatVQA

    return ChatVQA(**kwargs)


# PNP-VQA's three checkpoints replace path_or_id and revision; ``pnp`` holds the method's
# settings (its answer lengths among them: no max_new_tokens), ``seed`` its patch and
# caption sampling. It generates its answers: VQABQ words its chain.
_PNP = FamilyKeys(
    answers={"itm_model", "caption_model", "qa_model", "pnp", "seed", "dtype", "trust_remote_code"},
    runtime=CHECKPOINT.runtime,
    reads=GENERATIVE.reads,
)


@FAMILIES.register(
    "pnp-vqa",
    batch_size=SMALL_BATCH_SIZE,
    module="vqarobust.models.pnp_vqa",
    keys=_PNP | SAFETENSORS | SHARED_FEATURES,
)
def _pnp_vqa(**kwargs: Any) -> VQAModel:
    """PNP-VQA: BLIP ITM GradCAM -> BLIP question-guided captions -> UnifiedQA-v2 (FiD)."""
    from vqarobust.models.pnp_vqa import PnpVQA

    return PnpVQA(**kwargs)


@FAMILIES.register("vle", module="vqarobust.models.vle", keys=_HF | SHARED_FEATURES)
def _vle(**kwargs: Any) -> VQAModel:
    """VLE (CLIP + DeBERTa-v3 + co-attention fusion), e.g. hfl/vle-base-for-vqa."""
    from vqarobust.models.vle import VLEVQA

    return VLEVQA(**kwargs)


# answers: the answer vocabulary of a checkpoint whose config names none.
@FAMILIES.register(
    "lxmert",
    module="vqarobust.models.lxmert",
    keys=_HF | TRAINED | REGION_FEATURES | FamilyKeys(answers={"answers"}),
)
def _lxmert(**kwargs: Any) -> VQAModel:
    """LXMERT (LxmertForQuestionAnswering) over region features of a feature source."""
    from vqarobust.models.lxmert import LxmertVQA

    return LxmertVQA(**kwargs)


@FAMILIES.register(
    "openai-chat", module="vqarobust.models.served", keys=SERVED | GENERATIVE | PROMPT
)
def _openai_chat(**kwargs: Any) -> VQAModel:
    """A model served behind the OpenAI chat-completions protocol (vLLM, TGI, SGLang, ...)."""
    from vqarobust.models.served import OpenAIChatVQA

    return OpenAIChatVQA(**kwargs)


def entry_keys(family: str | None) -> FamilyKeys:
    """The keys an entry of ``family`` may hold: every entry's
    (:data:`vqarobust.models.keys.ENTRY`) and its ``keys`` tag, or for a family
    registered without one (a plugin's) :data:`vqarobust.models.keys.UNDECLARED`. A name
    the registry does not know (a test's own loader) gets every family's keys."""
    if family in FAMILIES:
        return ENTRY | FAMILIES.entry(family).tags.get("keys", UNDECLARED)
    out = ENTRY | UNDECLARED
    for name in FAMILIES:
        out = out | entry_keys(name)
    return out


def model_no_rerun_keys() -> dict[str, NoRerun]:
    """Every registered family's keys that change no answer, each with why (the model
    part of the invalidation matrix's ``RUNTIME``)."""
    return no_rerun_keys({name: entry_keys(name) for name in FAMILIES})


def generative_families() -> list[str]:
    """Families that generate their answer from a text input (their keys are
    :data:`~vqarobust.models.keys.GENERATIVE`'s: VQABQ asks them a chain of questions);
    the others classify over a fixed answer vocabulary."""
    return [f for f in FAMILIES if "chain_prompt" in entry_keys(f).reads]


def feature_families() -> list[str]:
    """Families that read region features (an entry's ``features`` source), not pixels."""
    return [f for f in FAMILIES if "features" in entry_keys(f).reads]


# job: the function of ``module`` a run_model job calls instead of loading a model.
@FAMILIES.register(
    "imported",
    module="vqarobust.harness_import",
    job="import_job",
    keys=FamilyKeys(reads={"logs", "format", "exported"}),
)
def _imported(**kwargs: Any) -> VQAModel:
    """Answers another harness logged (lmms-eval, VLMEvalKit): its run_model job imports
    them (vqarobust.harness_import.import_job); there is no model to load."""
    raise TypeError(
        f"model {kwargs.get('name')!r} of family imported has no adapter: its answers are "
        "imported from its logs (docs/interop.md)"
    )


def load_model(
    spec: str | dict[str, Any], name: str | None = None, device: str = "cpu"
) -> VQAModel:
    """Instantiate a model adapter.

    ``spec`` is a name from the model repository (``repository.yaml`` beside this
    module, linked as ``config/models.yaml``) or an entry dict (``family``,
    ``path_or_id`` and the adapter's options; ``from_repository`` merges a named entry).
    """
    from vqarobust.models.repository import resolve_spec

    entry = resolve_spec(spec)
    name = name or (spec if isinstance(spec, str) else "model")
    if "family" not in entry:
        raise KeyError(f"model {name!r}: entry has no 'family'; known: {FAMILIES.list()}")
    # What the workflow or the scheduler reads, or the params derive, is not the adapter's.
    keys = entry_keys(entry["family"])
    skip = keys.known - keys.adapter | keys.derived
    kwargs = {k: v for k, v in entry.items() if k not in skip}
    # The adapter's module (transformers' model code for most) imported apart, so that a
    # job process imports it with the collector paused (vqarobust.collector). Only a
    # declared one: a plugin factory's own module has run already, and may not be
    # importable by name (a file loaded by path).
    module = FAMILIES.entry(entry["family"]).tags.get("module")
    if module:
        with imports_paused():
            importlib.import_module(module)
    return FAMILIES.create(entry["family"], name=name, device=device, **kwargs)


@dataclass(frozen=True)
class ModelRef:
    """One model entry as a job loads it: ``spec`` is what can change answers (it
    fingerprints resumed work), ``options`` only how the model runs (batch size, ...), and
    ``loader`` builds the adapter (:func:`load_model`; tests pass their own)."""

    name: str
    spec: Mapping[str, Any]
    options: Mapping[str, Any] | None = None
    loader: Callable[..., VQAModel] = load_model

    def load(self, device: str) -> VQAModel:
        """The adapter on ``device``, its entry merged with the runtime options."""
        return self.loader({**self.spec, **(self.options or {})}, name=self.name, device=device)


def family_code_digest(family: str) -> str | None:
    """SHA-256 of the code that turns a family's requests into answers: its adapter
    module (the family's ``module`` tag) with every package module it imports, and
    ``vqarobust/inference.py``, which orders, batches and records them
    (:mod:`vqarobust.code_digest`). None for a family that is not registered (a test's
    own loader). It reruns a model's inference jobs (a ``run_model`` param) and keys its
    finished chunks, so an adapter edit is never answered from chunks of the old code."""
    if family not in FAMILIES:
        return None
    from vqarobust.code_digest import file_digest
    from vqarobust.digests import text_sha256
    from vqarobust.plugins import module_digest

    # A plugin family's module is its factory's, unless it names its adapter's.
    entry = FAMILIES.entry(family)
    module = entry.tags.get("module", entry.origin)
    return text_sha256(f"{module_digest(module)}\n{file_digest('vqarobust.inference')}\n")


def default_batch_size(family: str | None) -> int:
    """The batch size of a model entry that names none: its family's ``batch_size`` tag,
    else :data:`vqarobust.models.base.DEFAULT_BATCH_SIZE`."""
    if family in FAMILIES:
        return int(FAMILIES.entry(family).tags.get("batch_size", DEFAULT_BATCH_SIZE))
    return DEFAULT_BATCH_SIZE


def exposes_attention(entry: Mapping[str, Any]) -> bool:
    """Whether a model entry's adapter exposes attention over the image (its family's
    ``attention`` tag; a classifier only with the ViLT architecture, the default of a
    checkpoint the workflow does not train)."""
    tag = FAMILIES.entry(entry["family"]).tags.get("attention", False)
    if tag == "vilt":
        return entry.get("train", {}).get("architecture", "vilt") == "vilt"
    return bool(tag)


__all__ = [
    "DEFAULT_BATCH_SIZE",
    "FAMILIES",
    "FamilyKeys",
    "ModelRef",
    "SMALL_BATCH_SIZE",
    "default_batch_size",
    "entry_keys",
    "exposes_attention",
    "family_code_digest",
    "feature_families",
    "generative_families",
    "load_model",
    "model_no_rerun_keys",
]
