"""Model repository: adapter families behind a registry, and ``load_model``.

Families are registered as factories that import their adapter lazily, so listing
names (config validation at workflow start) does not import torch or transformers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vqarobust.registry import Registry

if TYPE_CHECKING:
    from vqarobust.models.base import VQAModel

# Questions per forward pass unless the model entry says otherwise (config.yaml's
# batch_size); the chat and PNP-VQA pipelines hold far more per question (long prompts,
# many captions), so their families start at SMALL_BATCH_SIZE (the family's
# ``batch_size`` tag, vqarobust.models.default_batch_size).
DEFAULT_BATCH_SIZE = 64
SMALL_BATCH_SIZE = 8

FAMILIES: Registry[Callable[..., VQAModel]] = Registry("model family")


# attention: whether the adapter exposes attention over the image (image_attention);
# "vilt": only a ViLT classifier does (the CNN+BoW has none).
@FAMILIES.register("vqa-classifier", attention="vilt", module="vqarobust.models.classifier")
def _vqa_classifier(**kwargs: Any) -> VQAModel:
    """Answer classifiers: ViLT, the reference CNN+BoW, any AutoModelForVQA checkpoint."""
    from vqarobust.models.classifier import ClassifierVQA

    return ClassifierVQA(**kwargs)


@FAMILIES.register("blip", attention=True, module="vqarobust.models.blip")
def _blip(**kwargs: Any) -> VQAModel:
    """BLIP VQA (BlipForQuestionAnswering): generative answers, vision features shared."""
    from vqarobust.models.blip import BlipVQA

    return BlipVQA(**kwargs)


@FAMILIES.register("llava", attention=True, module="vqarobust.models.chat")
def _llava(**kwargs: Any) -> VQAModel:
    """LLaVA (LlavaForConditionalGeneration) with the processor's chat template."""
    from vqarobust.models.chat import LlavaVQA

    return LlavaVQA(**kwargs)


@FAMILIES.register(
    "image-text-to-text", batch_size=SMALL_BATCH_SIZE, module="vqarobust.models.chat"
)
def _image_text_to_text(**kwargs: Any) -> VQAModel:
    """Any AutoModelForImageTextToText chat checkpoint (Qwen2-VL, SmolVLM, Idefics3, ...)."""
    from vqarobust.models.chat import ChatVQA

    return ChatVQA(**kwargs)


@FAMILIES.register("pnp-vqa", batch_size=SMALL_BATCH_SIZE, module="vqarobust.models.pnp_vqa")
def _pnp_vqa(**kwargs: Any) -> VQAModel:
    """PNP-VQA: BLIP ITM GradCAM -> BLIP question-guided captions -> UnifiedQA-v2 (FiD)."""
    from vqarobust.models.pnp_vqa import PnpVQA

    return PnpVQA(**kwargs)


@FAMILIES.register("vle", module="vqarobust.models.vle")
def _vle(**kwargs: Any) -> VQAModel:
    """VLE (CLIP + DeBERTa-v3 + co-attention fusion), e.g. hfl/vle-base-for-vqa."""
    from vqarobust.models.vle import VLEVQA

    return VLEVQA(**kwargs)


@FAMILIES.register("lxmert", module="vqarobust.models.lxmert")
def _lxmert(**kwargs: Any) -> VQAModel:
    """LXMERT (LxmertForQuestionAnswering) over region features of a feature source."""
    from vqarobust.models.lxmert import LxmertVQA

    return LxmertVQA(**kwargs)


@FAMILIES.register("openai-chat", module="vqarobust.models.served")
def _openai_chat(**kwargs: Any) -> VQAModel:
    """A model served behind the OpenAI chat-completions protocol (vLLM, TGI, SGLang, ...)."""
    from vqarobust.models.served import OpenAIChatVQA

    return OpenAIChatVQA(**kwargs)


# job: the function of ``module`` a run_model job calls instead of loading a model.
@FAMILIES.register("imported", module="vqarobust.harness_import", job="import_job")
def _imported(**kwargs: Any) -> VQAModel:
    """Answers another harness logged (lmms-eval, VLMEvalKit): its run_model job imports
    them (vqarobust.harness_import.import_job); there is no model to load."""
    raise TypeError(
        f"model {kwargs.get('name')!r} of family imported has no adapter: its answers are "
        "imported from its logs (docs/interop.md)"
    )


# Keys of an entry that describe the model for the workflow, the scheduler or the reader,
# not the adapter.
# A served model's endpoint (its base_url's host) and served_revision only key its
# fingerprint.
_NON_ADAPTER_KEYS = {
    *("family", "train", "gpu_memory_gb", "needs", "from_repository", "device", "mem_mb"),
    *("runtime", "gpu_model", "chain_prompt", "features", "endpoint", "served_revision"),
}
# Families that generate their answer from a text input (VQABQ asks them a chain of
# questions); the others classify over a fixed answer vocabulary.
GENERATIVE_FAMILIES = ("blip", "llava", "image-text-to-text", "pnp-vqa", "openai-chat")
# Families that read region features (an entry's `features` source), not pixels.
FEATURE_FAMILIES = ("lxmert",)


def load_model(
    spec: str | dict[str, Any], name: str | None = None, device: str = "cpu"
) -> VQAModel:
    """Instantiate a model adapter.

    ``spec`` is a name from ``config/models.yaml`` or an entry dict (``family``,
    ``path_or_id`` and the adapter's options; ``from_repository`` merges a named entry).
    """
    from vqarobust.models.repository import resolve_spec

    entry = resolve_spec(spec)
    name = name or (spec if isinstance(spec, str) else "model")
    if "family" not in entry:
        raise KeyError(f"model {name!r}: entry has no 'family'; known: {FAMILIES.list()}")
    kwargs = {k: v for k, v in entry.items() if k not in _NON_ADAPTER_KEYS}
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
    "FEATURE_FAMILIES",
    "GENERATIVE_FAMILIES",
    "ModelRef",
    "SMALL_BATCH_SIZE",
    "default_batch_size",
    "exposes_attention",
    "family_code_digest",
    "load_model",
]
