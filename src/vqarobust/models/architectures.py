"""Architectures of the reference models that the workflow trains, by name.

Builders import transformers lazily so that listing names (config validation) stays cheap.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vqarobust.registry import Registry

ARCHITECTURES: Registry[Callable[..., Any]] = Registry("architecture")


def _labels(labels: list[str]) -> dict[str, Any]:
    return {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {a: i for i, a in enumerate(labels)},
    }


@ARCHITECTURES.register("vilt")
def build_vilt(
    vocab_size: int,
    labels: list[str],
    image_size: int,
    hidden_size: int = 128,
    num_hidden_layers: int = 4,
    num_attention_heads: int = 4,
    patch_size: int = 16,
    intermediate_size: int | None = None,
    **_: Any,
) -> Any:
    """A randomly initialised tiny ``ViltForQuestionAnswering`` (MLP width 4x hidden by default)."""
    from transformers import ViltConfig, ViltForQuestionAnswering

    config = ViltConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size or 4 * hidden_size,
        image_size=image_size,
        patch_size=patch_size,
        max_position_embeddings=40,
        **_labels(labels),
    )
    return ViltForQuestionAnswering(config)


@ARCHITECTURES.register("cnn-bow")
def build_cnn_bow(
    vocab_size: int,
    labels: list[str],
    image_size: int,
    channels: list[int] | None = None,
    embed_dim: int = 64,
    hidden_dim: int = 128,
    pool_size: int = 4,
    fusion: str = "late",
    film_blocks: int = 2,
    first_stride: int = 1,
    **_: Any,
) -> Any:
    """A randomly initialised CNN classifier: late fusion with a bag of words, or FiLM
    conditioning by a GRU question encoder (``fusion="film"``)."""
    from vqarobust.models.cnn_bow import CnnBowConfig, CnnBowForQuestionAnswering

    config = CnnBowConfig(
        vocab_size=vocab_size,
        channels=channels,
        embed_dim=embed_dim,
        hidden_dim=hidden_dim,
        pool_size=pool_size,
        fusion=fusion,
        film_blocks=film_blocks,
        first_stride=first_stride,
        **_labels(labels),
    )
    return CnnBowForQuestionAnswering(config)


@ARCHITECTURES.register("lxmert", inputs="features")
def build_lxmert(
    vocab_size: int,
    labels: list[str],
    visual_feat_dim: int,
    hidden_size: int = 128,
    num_attention_heads: int = 4,
    intermediate_size: int | None = None,
    l_layers: int = 2,
    x_layers: int = 2,
    r_layers: int = 1,
    dropout: float = 0.1,
    **_: Any,
) -> Any:
    """A randomly initialised tiny ``LxmertForQuestionAnswering`` over region features of
    dimension ``visual_feat_dim`` (language, cross-modality and object-relation layers)."""
    from transformers import LxmertConfig, LxmertForQuestionAnswering

    config = LxmertConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        num_attention_heads=num_attention_heads,
        intermediate_size=intermediate_size or 4 * hidden_size,
        l_layers=l_layers,
        x_layers=x_layers,
        r_layers=r_layers,
        visual_feat_dim=visual_feat_dim,
        visual_pos_dim=4,
        num_qa_labels=len(labels),
        max_position_embeddings=40,
        hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=dropout,
    )
    return LxmertForQuestionAnswering(config)
