"""VLE (Vision-Language Encoder, iFLYTEK) for VQA, implemented here from its architecture.

VLE is a CLIP vision encoder and a DeBERTa-v3 text encoder, each projected to the fusion
width and tagged with a token-type embedding (text 0, image 1), followed by co-attention
fusion layers in pairs: a text layer (self-attention over text, cross-attention to the
image) and an image layer (the reverse), both reading the previous pair's outputs. The
first token of each stream is pooled (dense + tanh); the two pooled vectors, text first,
feed the VQA classifier (linear 2H->2H, LayerNorm, GELU, linear 2H->labels). Note that the
vision encoder's final LayerNorm is applied to every image token, not only to the pooled
one as in CLIP.

transformers has no VLE class, and the public repository's modelling code is loaded with
``trust_remote_code``; here the vision and text towers are transformers' own
``CLIPVisionModel`` and ``DebertaV2Model`` and the fusion part is written in this module.
Public checkpoints (``hfl/vle-base-for-vqa``) are read from safetensors or with a
weights-only ``torch.load`` (no arbitrary unpickling); their tensor names are those of the
public ``VLEForVQA`` (``vle.vision_model.vision_model.*``, ``vle.text_model.*``,
``vle.cross_modal_*``, ``vqa_classifier.*``) and are mapped onto this module's names by
:func:`map_public_names`, which refuses a checkpoint with a tensor it does not use or
without one the model needs.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from PIL import Image
from torch import nn

from vqarobust.models.base import SharesImageFeatures
from vqarobust.models.hf import HFVQAModel
from vqarobust.models.replies import Reply, argmax_labels


class CheckpointError(ValueError):
    """A VLE checkpoint whose tensors do not match the architecture its config describes."""


# Public name prefix -> this module's prefix. Order matters: the first match wins.
PUBLIC_PREFIXES = (
    ("vle.vision_model.vision_model.", "vision."),
    ("vle.text_model.", "text."),
    ("vle.", ""),
    ("vqa_classifier.", "vqa_classifier."),
)
# Buffers older transformers saved with the weights: checked (they must be 0..n-1), then
# dropped, since current transformers rebuilds them.
_POSITION_IDS = re.compile(r"^(vision|text)\.embeddings\.position_ids$")

FUSION_DEFAULTS = {
    "num_token_types": 2,
    "hidden_size": 768,
    "num_hidden_layers": 6,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
    "hidden_act": "gelu",
    "layer_norm_eps": 1e-12,
}


def read_config(path: str | Path) -> dict[str, Any]:
    """The towers' transformers configs, the fusion settings and the labels of a VLE
    checkpoint folder's ``config.json`` (``model_type: vle``)."""
    raw = json.loads(Path(path, "config.json").read_text(encoding="utf-8"))
    try:
        return config_from_dict(raw)
    except CheckpointError as exc:
        raise CheckpointError(f"{path}: {exc}") from None


def config_from_dict(raw: dict[str, Any]) -> dict[str, Any]:
    """:func:`read_config` for an already parsed ``config.json``."""
    from transformers import CLIPConfig, CLIPVisionConfig, DebertaV2Config

    if raw.get("model_type") != "vle":
        raise CheckpointError(f"config.json has model_type {raw.get('model_type')!r}, not 'vle'")
    vision = dict(raw["vision_config"])
    kind = vision.pop("model_type", "clip_vision_model")
    if kind == "clip":
        vision_config = CLIPConfig(**vision).vision_config
    elif kind == "clip_vision_model":
        vision_config = CLIPVisionConfig(**vision)
    else:
        raise CheckpointError(f"VLE's vision tower must be CLIP, got {kind!r}")
    text = dict(raw["text_config"])
    if text.pop("model_type", "deberta-v2") != "deberta-v2":
        raise CheckpointError("VLE's text tower must be DeBERTa-v2/v3")
    fusion = {k: raw.get(k, v) for k, v in FUSION_DEFAULTS.items()}
    labels = raw.get("id2label") or {}
    if not labels:
        raise CheckpointError("config.json has no id2label (is it a VQA checkpoint?)")
    return {
        "vision": vision_config,
        "text": DebertaV2Config(**text),
        "fusion": fusion,
        "id2label": {int(k): v for k, v in labels.items()},
    }


class _Projections(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.query, self.key, self.value = (nn.Linear(width, width) for _ in range(3))


class _AddNorm(nn.Module):
    """Dense, then LayerNorm of the sum with the residual (BERT's output blocks)."""

    def __init__(self, width_in: int, width: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(width_in, width)
        self.LayerNorm = nn.LayerNorm(width, eps=eps)  # noqa: N815 (checkpoint name)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(x) + residual)


class FusionAttention(nn.Module):
    """BERT multi-head attention: queries from ``x``, keys and values from ``context``."""

    def __init__(self, width: int, heads: int, eps: float) -> None:
        super().__init__()
        if width % heads:
            raise CheckpointError(f"fusion width {width} is not a multiple of {heads} heads")
        self.heads = heads
        self.self = _Projections(width)
        self.output = _AddNorm(width, width, eps)

    def forward(self, x: torch.Tensor, context: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """``mask`` is additive, broadcast to (batch, 1, 1, context length)."""
        b, n, w = x.shape
        d = w // self.heads

        def split(t: torch.Tensor) -> torch.Tensor:
            return t.view(b, -1, self.heads, d).transpose(1, 2)

        q, k, v = (
            split(self.self.query(x)),
            split(self.self.key(context)),
            split(self.self.value(context)),
        )
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + mask
        out = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, w)
        return self.output(out, x)


class _Intermediate(nn.Module):
    def __init__(self, width: int, inner: int, act: str) -> None:
        super().__init__()
        from transformers.activations import ACT2FN

        self.dense = nn.Linear(width, inner)
        self.act = ACT2FN[act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))


class CrossLayer(nn.Module):
    """One fusion layer of one stream: self-attention, cross-attention to the other
    stream, feed-forward; each with residual and LayerNorm."""

    def __init__(self, fusion: dict[str, Any]) -> None:
        super().__init__()
        w, eps = fusion["hidden_size"], fusion["layer_norm_eps"]
        self.attention = FusionAttention(w, fusion["num_attention_heads"], eps)
        self.crossattention = FusionAttention(w, fusion["num_attention_heads"], eps)
        self.intermediate = _Intermediate(w, fusion["intermediate_size"], fusion["hidden_act"])
        self.output = _AddNorm(fusion["intermediate_size"], w, eps)

    def forward(
        self, x: torch.Tensor, other: torch.Tensor, mask: torch.Tensor, other_mask: torch.Tensor
    ) -> torch.Tensor:
        x = self.attention(x, x, mask)
        x = self.crossattention(x, other, other_mask)
        return self.output(self.intermediate(x), x)


class Pooler(nn.Module):
    """Dense + tanh over the first token."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.dense = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))


def additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(batch, length) 1/0 mask -> (batch, 1, 1, length) additive mask (0 or dtype min)."""
    return (1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min


class VLEForVQA(nn.Module):
    """The VLE VQA model: towers, projections, fusion layers, poolers and classifier."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        from transformers import CLIPVisionModel, DebertaV2Model

        fusion = config["fusion"]
        w = fusion["hidden_size"]
        self.vision = CLIPVisionModel(config["vision"])
        self.text = DebertaV2Model(config["text"])
        self.text_projection_layer = nn.Linear(config["text"].hidden_size, w)
        self.image_projection_layer = nn.Linear(config["vision"].hidden_size, w)
        self.token_type_embeddings = nn.Embedding(fusion["num_token_types"], w)
        layers = fusion["num_hidden_layers"]
        self.cross_modal_text_layers = nn.ModuleList(CrossLayer(fusion) for _ in range(layers))
        self.cross_modal_image_layers = nn.ModuleList(CrossLayer(fusion) for _ in range(layers))
        self.cross_modal_text_pooler = Pooler(w)
        self.cross_modal_image_pooler = Pooler(w)
        self.vqa_classifier = nn.Sequential(
            nn.Linear(2 * w, 2 * w),
            nn.LayerNorm(2 * w),
            nn.GELU(),
            nn.Linear(2 * w, len(config["id2label"])),
        )

    def encode_images(self, pixel_values: torch.Tensor) -> torch.Tensor:
        """Image tokens entering the fusion layers (LayerNorm on every token, projected,
        image token type added): one row per image, shareable by its questions."""
        hidden = self.vision(pixel_values=pixel_values).last_hidden_state
        embeds = self.image_projection_layer(self.vision.post_layernorm(hidden))
        kind = torch.ones(embeds.shape[:2], dtype=torch.long, device=embeds.device)
        return embeds + self.token_type_embeddings(kind)

    def forward(
        self, input_ids: torch.Tensor, attention_mask: torch.Tensor, image_embeds: torch.Tensor
    ) -> torch.Tensor:
        """VQA logits for questions about images already passed through :meth:`encode_images`."""
        text = self.text(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        x = self.text_projection_layer(text) + self.token_type_embeddings(
            torch.zeros_like(input_ids)
        )
        y = image_embeds
        image_ones = torch.ones(y.shape[:2], dtype=torch.long, device=y.device)
        text_mask, image_mask = (
            additive_mask(attention_mask, x.dtype),
            additive_mask(image_ones, x.dtype),
        )
        for text_layer, image_layer in zip(
            self.cross_modal_text_layers, self.cross_modal_image_layers, strict=True
        ):
            x, y = text_layer(x, y, text_mask, image_mask), image_layer(y, x, image_mask, text_mask)
        pooled = torch.cat([self.cross_modal_text_pooler(x), self.cross_modal_image_pooler(y)], -1)
        return self.vqa_classifier(pooled)


def read_checkpoint(path: str | Path) -> dict[str, torch.Tensor]:
    """All tensors of a checkpoint folder: ``model.safetensors`` (or its sharded index),
    else ``pytorch_model.bin`` (or its index) loaded weights-only, never unpickling objects."""
    folder = Path(path)
    for single, index, reader in (
        ("model.safetensors", "model.safetensors.index.json", _read_safetensors),
        ("pytorch_model.bin", "pytorch_model.bin.index.json", _read_torch),
    ):
        if (folder / single).is_file():
            return reader(folder / single)
        if (folder / index).is_file():
            shards = sorted(set(json.loads((folder / index).read_text())["weight_map"].values()))
            state: dict[str, torch.Tensor] = {}
            for shard in shards:
                state.update(reader(folder / shard))
            return state
    raise CheckpointError(f"{folder}: no model.safetensors or pytorch_model.bin")


def _read_safetensors(file: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(file))


def _read_torch(file: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as exc:  # an object that is not a tensor: refused, never executed
        raise CheckpointError(
            f"{file}: not a weights-only checkpoint ({type(exc).__name__}: {exc})"
        ) from exc
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise CheckpointError(f"{file}: expected a mapping of names to tensors")
    return state


def public_name(name: str) -> str:
    """The public checkpoint's name of one of this module's tensors (the inverse of
    :func:`map_public_names`' renaming)."""
    for old, new in PUBLIC_PREFIXES:
        if new and name.startswith(new):
            return old + name[len(new) :]
    return "vle." + name


def map_public_names(state: dict[str, torch.Tensor], model: nn.Module) -> dict[str, torch.Tensor]:
    """The checkpoint's tensors under this module's names.

    Every tensor must map onto a parameter or buffer of ``model`` (position-id buffers are
    checked, then dropped) and every parameter of ``model`` must be in the checkpoint;
    shapes must agree. Anything else raises :class:`CheckpointError` naming the tensors.
    """
    expected = model.state_dict()
    mapped: dict[str, torch.Tensor] = {}
    unused: list[str] = []
    for public, tensor in state.items():
        name = next(
            (new + public[len(old) :] for old, new in PUBLIC_PREFIXES if public.startswith(old)),
            None,
        )
        if name is not None and _POSITION_IDS.match(name):
            flat = tensor.reshape(-1)
            if not torch.equal(flat, torch.arange(flat.numel(), dtype=flat.dtype)):
                raise CheckpointError(f"{public}: position ids are not 0..{flat.numel() - 1}")
            continue
        if name is None or name not in expected:
            unused.append(public)
            continue
        if tuple(tensor.shape) != tuple(expected[name].shape):
            raise CheckpointError(
                f"{public}: shape {tuple(tensor.shape)} in the checkpoint, "
                f"{tuple(expected[name].shape)} in the architecture its config describes"
            )
        mapped[name] = tensor
    missing = sorted(set(expected) - set(mapped))
    if unused or missing:
        raise CheckpointError(
            "checkpoint does not match the VLE architecture: "
            + (f"{len(unused)} tensors unused ({', '.join(unused[:5])}) " if unused else "")
            + (f"{len(missing)} missing ({', '.join(missing[:5])})" if missing else "")
        )
    return mapped


def load_vle(path: str | Path) -> tuple[VLEForVQA, dict[int, str]]:
    """The VLE VQA model of a checkpoint folder (float32, CPU) and its answer labels."""
    config = read_config(path)
    model = VLEForVQA(config)
    model.load_state_dict(map_public_names(read_checkpoint(path), model), strict=True)
    return model.eval(), config["id2label"]


class VLEVQA(SharesImageFeatures, HFVQAModel):
    """A VLE VQA checkpoint (e.g. ``hfl/vle-base-for-vqa``): argmax over its answer labels.

    Each distinct image goes through the vision tower once per ``respond_all`` call.
    """

    def __init__(self, path_or_id: str, share_image_features: bool = True, **kwargs: Any) -> None:
        super().__init__(path_or_id, **kwargs)
        self.share_image_features = share_image_features

    def load(self, local: str, trust_remote_code: bool) -> None:
        """Tokenizer, CLIP image processor and the model, implemented here (no remote code)."""
        from transformers import AutoImageProcessor
        from transformers.models.auto.tokenization_auto import tokenizer_class_from_name

        if trust_remote_code:
            raise ValueError(
                f"model {self.name!r}: family vle runs no remote code; drop trust_remote_code"
            )
        # The tokenizer class named in tokenizer_config.json (DeBERTa-v3's when unnamed):
        # AutoTokenizer would consult config.json, whose model_type transformers lacks.
        settings = Path(local, "tokenizer_config.json")
        named = None
        if settings.is_file():
            named = json.loads(settings.read_text()).get("tokenizer_class")
        tokenizer_class = tokenizer_class_from_name(named or "DebertaV2Tokenizer")
        if tokenizer_class is None:
            raise CheckpointError(f"model {self.name!r}: unknown tokenizer_class {named!r}")
        self.tokenizer = tokenizer_class.from_pretrained(local)
        try:
            self.image_processor = AutoImageProcessor.from_pretrained(local)
        except ValueError as exc:
            raise CheckpointError(
                f"model {self.name!r}: {local} needs preprocessor_config.json naming CLIP's "
                f"image processor ({exc})"
            ) from exc
        model, self.id2label = load_vle(local)
        self.model = model.to(self.device, self.dtype)

    def _encode(self, images: list[Image.Image]) -> torch.Tensor:
        pixels = self.image_processor(images, return_tensors="pt")["pixel_values"]
        return self.model.encode_images(pixels.to(self.device, self.dtype))

    @torch.inference_mode()
    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str | Reply]:
        """Argmax answers for one batch."""
        text = self.tokenizer(
            list(questions), padding="longest", truncation=True, return_tensors="pt"
        )
        image_embeds = torch.stack(self.image_features(images, self._encode))
        logits = self.model(
            text["input_ids"].to(self.device), text["attention_mask"].to(self.device), image_embeds
        )
        return argmax_labels(logits, self.id2label)
