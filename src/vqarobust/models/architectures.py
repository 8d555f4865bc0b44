"""Architectures of the reference models that the workflow trains, by name.

Each architecture registers a builder and the frozen dataclass of its own options (a
``train`` section's keys besides the training settings, docs/models.md); config
validation lists those fields (:func:`options_of`). Builders import transformers lazily
so that listing names (config validation) stays cheap.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from vqarobust.collector import imports_paused
from vqarobust.registry import Registry

ARCHITECTURES: Registry[Callable[..., Any]] = Registry("architecture")


@dataclass(frozen=True)
class ViltOptions:
    """A tiny ViLT's size (MLP width 4x hidden unless ``intermediate_size``)."""

    hidden_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    patch_size: int = 16
    intermediate_size: int | None = None


@dataclass(frozen=True)
class CnnBowOptions:
    """The CNN classifier's stem ``channels``, widths, pooling and fusion (``late``: a bag
    of words; ``film``: FiLM by a GRU question encoder over ``film_blocks`` blocks)."""

    channels: list[int] | None = None
    embed_dim: int = 64
    hidden_dim: int = 128
    pool_size: int = 4
    fusion: str = "late"
    film_blocks: int = 2
    first_stride: int = 1


@dataclass(frozen=True)
class LxmertOptions:
    """A tiny LXMERT's size: language, cross-modality and object-relation layers."""

    hidden_size: int = 128
    num_attention_heads: int = 4
    intermediate_size: int | None = None
    l_layers: int = 2
    x_layers: int = 2
    r_layers: int = 1
    dropout: float = 0.1


def options_of(architecture: str) -> type:
    """The options dataclass of a registered architecture."""
    return ARCHITECTURES.entry(architecture).tags["options"]


def build_architecture(architecture: str, options: Mapping[str, Any], **data: Any) -> Any:
    """A randomly initialised model of ``architecture``: ``options`` are its own keys
    (an unknown one is an error naming it), ``data`` what the training data fixes
    (``vocab_size``, ``labels`` and ``image_size`` or ``visual_feat_dim``)."""
    cls = options_of(architecture)
    unknown = sorted(set(options) - {f.name for f in dataclasses.fields(cls)})
    if unknown:
        raise TypeError(f"architecture {architecture!r} takes no options {unknown}")
    # The builders import transformers' model code, then build a small model: paused in a
    # job (vqarobust.collector), the model's objects frozen with the imports'.
    with imports_paused():
        return ARCHITECTURES.get(architecture)(options=cls(**options), **data)


def _labels(labels: list[str]) -> dict[str, Any]:
    return {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {a: i for i, a in enumerate(labels)},
    }


@ARCHITECTURES.register("vilt", options=ViltOptions)
def build_vilt(vocab_size: int, labels: list[str], image_size: int, options: ViltOptions) -> Any:
    """A randomly initialised tiny ``ViltForQuestionAnswering``."""
    from transformers import ViltConfig, ViltForQuestionAnswering

    config = ViltConfig(
        vocab_size=vocab_size,
        hidden_size=options.hidden_size,
        num_hidden_layers=options.num_hidden_layers,
        num_attention_heads=options.num_attention_heads,
        intermediate_size=options.intermediate_size or 4 * options.hidden_size,
        image_size=image_size,
        patch_size=options.patch_size,
        max_position_embeddings=40,
        **_labels(labels),
    )
    return ViltForQuestionAnswering(config)


@ARCHITECTURES.register("cnn-bow", options=CnnBowOptions)
def build_cnn_bow(
    vocab_size: int, labels: list[str], image_size: int, options: CnnBowOptions
) -> Any:
    """A randomly initialised CNN classifier: late fusion with a bag of words, or FiLM
    conditioning by a GRU question encoder (``fusion="film"``). ``image_size`` is not
    needed: the pooling adapts to any size."""
    from vqarobust.models.cnn_bow import CnnBowConfig, CnnBowForQuestionAnswering

    config = CnnBowConfig(vocab_size=vocab_size, **dataclasses.asdict(options), **_labels(labels))
    return CnnBowForQuestionAnswering(config)


@ARCHITECTURES.register("lxmert", inputs="features", options=LxmertOptions)
def build_lxmert(
    vocab_size: int, labels: list[str], visual_feat_dim: int, options: LxmertOptions
) -> Any:
    """A randomly initialised tiny ``LxmertForQuestionAnswering`` over region features of
    dimension ``visual_feat_dim``."""
    from transformers import LxmertConfig, LxmertForQuestionAnswering

    config = LxmertConfig(
        vocab_size=vocab_size,
        hidden_size=options.hidden_size,
        num_attention_heads=options.num_attention_heads,
        intermediate_size=options.intermediate_size or 4 * options.hidden_size,
        l_layers=options.l_layers,
        x_layers=options.x_layers,
        r_layers=options.r_layers,
        visual_feat_dim=visual_feat_dim,
        visual_pos_dim=4,
        num_qa_labels=len(labels),
        max_position_embeddings=40,
        hidden_dropout_prob=options.dropout,
        attention_probs_dropout_prob=options.dropout,
    )
    return LxmertForQuestionAnswering(config)
