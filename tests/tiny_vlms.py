"""Tiny random-initialised checkpoints of today's chat VLMs, built offline for the
``image-text-to-text`` family's tests (docs/models.md, "Chat models by architecture").

Each builder saves a model of the real class (``Qwen2_5_VLForConditionalGeneration``,
``Idefics3ForConditionalGeneration``, ...) with one or two layers of width 32, and a
processor of the real class with the real image processor (each architecture's own image
splitting, dynamic resolution or tiling, at small sizes), a word-level tokenizer carrying
the architecture's special tokens, and a chat template that renders the model's published
prompt format (``RENDERED`` holds one rendering per architecture, the tests check it).
PaliGemma has no chat template: its checkpoints take a task prefix.

Random models emit special tokens as readily as words; the builders zero the output rows
of the special tokens other than end-of-turn, so greedy answers are words that differ
from image to image, and a batching bug shows as a changed answer.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.tiny_checkpoints import WORDS

CHAT_WORDS = [
    *WORDS,
    "user",
    "model",
    "assistant",
    "system",
    "you",
    "are",
    "helpful",
    "answer",
    "en",
    "single",
    "word",
    "or",
    "phrase",
    "using",
    "question",
    ":",
    ".",
    "bus",
    "green",
    "four",
]
VISION = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 1,
    "num_attention_heads": 2,
    "image_size": 32,
    "patch_size": 8,
}
TEXT = {
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "num_attention_heads": 2,
    "num_key_value_heads": 1,
    "max_position_embeddings": 1024,
}

# The prompt each template renders for one image and the text "Q?" with the generation
# prompt: the published format of each family (its hub checkpoint's chat template).
RENDERED = {
    "qwen2-vl": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n"
    "<|vision_start|><|image_pad|><|vision_end|>Q?<|im_end|>\n<|im_start|>assistant\n",
    "qwen3-vl": "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>Q?<|im_end|>\n"
    "<|im_start|>assistant\n",
    "idefics3": "<|begin_of_text|>User:<image>Q?<end_of_utterance>\nAssistant:",
    "smolvlm": "<|im_start|>User:<image>Q?<end_of_utterance>\nAssistant:",
    "llava-onevision": "<|im_start|>user <image>\nQ?<|im_end|><|im_start|>assistant\n",
    "gemma3": "<bos><start_of_turn>user\n<start_of_image>Q?<end_of_turn>\n<start_of_turn>model\n",
}
RENDERED["qwen2.5-vl"] = RENDERED["qwen2-vl"]

_QWEN_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "{{ system }}{% endif %}<|im_start|>{{ message['role'] }}\n"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
    "<|vision_start|><|image_pad|><|vision_end|>{% else %}{{ part['text'] }}{% endif %}"
    "{% endfor %}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
_IDEFICS_TEMPLATE = (
    "{{ start }}{% for message in messages %}{{ message['role'] | capitalize }}"
    "{% if message['content'][0]['type'] == 'image' %}:{% else %}: {% endif %}"
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}<end_of_utterance>\n{% endfor %}"
    "{% if add_generation_prompt %}Assistant:{% endif %}"
)
TEMPLATES = {
    "qwen2-vl": _QWEN_TEMPLATE.replace(
        "{{ system }}", "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
    ),
    "qwen3-vl": _QWEN_TEMPLATE.replace("{{ system }}", ""),
    "idefics3": _IDEFICS_TEMPLATE.replace("{{ start }}", "<|begin_of_text|>"),
    "smolvlm": _IDEFICS_TEMPLATE.replace("{{ start }}", "<|im_start|>"),
    "llava-onevision": (
        "{% for message in messages %}<|im_start|>{{ message['role'] }} "
        "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
        "{% endif %}{% endfor %}{% for part in message['content'] %}"
        "{% if part['type'] == 'text' %}{{ part['text'] }}{% endif %}{% endfor %}<|im_end|>"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    "gemma3": (
        "{{ bos_token }}{% for message in messages %}<start_of_turn>"
        "{{ 'model' if message['role'] == 'assistant' else message['role'] }}\n"
        "{% for part in message['content'] %}{% if part['type'] == 'image' %}"
        "<start_of_image>{% else %}{{ part['text'] | trim }}{% endif %}{% endfor %}"
        "<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n"
        "{% endif %}"
    ),
}
TEMPLATES["qwen2.5-vl"] = TEMPLATES["qwen2-vl"]

_QWEN_SPECIAL = [
    "<|im_start|>",
    "<|im_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<|endoftext|>",
]
_IDEFICS_SPECIAL = ["<fake_token_around_image>", "<image>", "<end_of_utterance>", "<global-img>"]


def word_tokenizer(
    special: list[str], bos: str, eos: str, pad: str = "[PAD]", attrs: dict | None = None
) -> Any:
    """A lower-casing word tokenizer over ``CHAT_WORDS`` with the architecture's special
    tokens (``attrs``: named ones, such as Gemma 3's ``boi_token``) and no token type ids
    (the language models here take none)."""
    from transformers import BertTokenizerFast

    vocab = {
        t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *CHAT_WORDS])
    }
    tok = BertTokenizerFast(
        vocab=vocab,
        do_lower_case=True,
        model_max_length=4096,
        extra_special_tokens=attrs or {},
        model_input_names=["input_ids", "attention_mask"],
    )
    specials = [t for t in [*special, bos, eos] if t not in vocab]
    tok.add_special_tokens({"additional_special_tokens": specials})
    tok.bos_token, tok.eos_token, tok.pad_token = bos, eos, pad
    return tok


def _finish(model: Any, processor: Any, tok: Any, eos: str, path: Path, std: float = 0.5) -> Path:
    """Spread the random weights (answers then depend on the image and the question),
    silence the special tokens but ``eos``, and save model and processor. Every weight of
    two or more dimensions is drawn here from seed 1, the others (norms, biases) keep
    their deterministic initial values: the checkpoint is the same in every run."""
    import torch

    eos_id = tok.convert_tokens_to_ids(eos)
    # Seed 1: every architecture's tiny model then gives at least 3 distinct replies to
    # the tests' 5 requests (seed 0 leaves Qwen3-VL's mostly empty).
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.normal_(0.0, std)
        head = model.get_output_embeddings().weight
        for t in tok.all_special_ids:
            if t != eos_id:
                head[t] = 0.0
    model.generation_config.eos_token_id = eos_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.bos_token_id = tok.bos_token_id
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def _mrope(head_dim: int) -> dict:
    half = head_dim // 2
    return {"rope_type": "default", "mrope_section": [half - 2 * (half // 3), half // 3, half // 3]}


def _qwen(path: Path, arch: str, vision: dict | None = None, max_patches: int = 36) -> Path:
    from transformers.models.qwen2_vl import Qwen2VLImageProcessorPil

    tok = word_tokenizer(_QWEN_SPECIAL, "<|endoftext|>", "<|im_end|>", pad="<|endoftext|>")
    ids = {
        "image_token_id": tok.convert_tokens_to_ids("<|image_pad|>"),
        "video_token_id": tok.convert_tokens_to_ids("<|video_pad|>"),
        "vision_start_token_id": tok.convert_tokens_to_ids("<|vision_start|>"),
        "vision_end_token_id": tok.convert_tokens_to_ids("<|vision_end|>"),
    }
    text = {
        **TEXT,
        "vocab_size": len(tok),
        "pad_token_id": tok.pad_token_id,
        "bos_token_id": tok.bos_token_id,
        "eos_token_id": tok.eos_token_id,
        "rope_parameters": _mrope(16),
    }
    patch = 16 if arch == "qwen3-vl" else 14
    # Images of 40-70 px become 2x2 to 3x3 groups of merged patches.
    image_processor = Qwen2VLImageProcessorPil(
        patch_size=patch,
        merge_size=2,
        size={"shortest_edge": 4 * patch * patch, "longest_edge": max_patches * patch * patch},
    )
    if arch == "qwen2-vl":
        from transformers import (
            Qwen2VLConfig,
            Qwen2VLForConditionalGeneration,
            Qwen2VLProcessor,
            Qwen2VLVideoProcessor,
        )

        vision = {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, **(vision or {})}
        model = Qwen2VLForConditionalGeneration(
            Qwen2VLConfig(vision_config=vision, text_config=text, **ids)
        )
        video, cls = Qwen2VLVideoProcessor(patch_size=patch), Qwen2VLProcessor
    elif arch == "qwen2.5-vl":
        from transformers import (
            Qwen2_5_VLConfig,
            Qwen2_5_VLForConditionalGeneration,
            Qwen2_5_VLProcessor,
            Qwen2VLVideoProcessor,
        )

        vision = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "fullatt_block_indexes": [1],
            "window_size": 56,
        }
        model = Qwen2_5_VLForConditionalGeneration(
            Qwen2_5_VLConfig(vision_config=vision, text_config=text, **ids)
        )
        video, cls = Qwen2VLVideoProcessor(patch_size=patch), Qwen2_5_VLProcessor
    else:
        from transformers import (
            Qwen3VLConfig,
            Qwen3VLForConditionalGeneration,
            Qwen3VLProcessor,
            Qwen3VLVideoProcessor,
        )

        vision = {
            "depth": 2,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 32,
            "num_position_embeddings": 64,
            "deepstack_visual_indexes": [0],
        }
        rope = {"rope_type": "default", "mrope_section": [4, 2, 2], "mrope_interleaved": True}
        text = {**text, "head_dim": 16, "rope_parameters": rope}
        model = Qwen3VLForConditionalGeneration(
            Qwen3VLConfig(vision_config=vision, text_config=text, **ids)
        )
        video, cls = Qwen3VLVideoProcessor(patch_size=patch), Qwen3VLProcessor
    processor = cls(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=video,
        chat_template=TEMPLATES[arch],
    )
    return _finish(model, processor, tok, "<|im_end|>", path)


def tiny_qwen2_vl(path: Path, vision: dict | None = None, max_patches: int = 36) -> Path:
    """Qwen2-VL: dynamic resolution (``image_grid_thw``), M-RoPE. ``vision`` overrides the
    vision config, ``max_patches`` caps the patches per image (benchmarks size them up)."""
    return _qwen(path, "qwen2-vl", vision, max_patches)


def tiny_qwen2_5_vl(path: Path) -> Path:
    """Qwen2.5-VL: Qwen2-VL's dynamic resolution with windowed vision attention."""
    return _qwen(path, "qwen2.5-vl")


def tiny_qwen3_vl(path: Path) -> Path:
    """Qwen3-VL: 16-pixel patches, deepstack features, interleaved M-RoPE."""
    return _qwen(path, "qwen3-vl")


def _idefics(path: Path, arch: str) -> Path:
    tok = word_tokenizer(
        _IDEFICS_SPECIAL,
        "<|begin_of_text|>" if arch == "idefics3" else "<|im_start|>",
        "<end_of_utterance>",
    )
    # Images are split into 32-px tiles (at most 2x2 here) plus a global view.
    sizes = {"size": {"longest_edge": 64}, "max_image_size": {"longest_edge": 32}}
    vision = {k: v for k, v in VISION.items() if k != "num_hidden_layers"} | {
        "num_hidden_layers": 1
    }
    text = {**TEXT, "model_type": "llama", "vocab_size": len(tok), "pad_token_id": tok.pad_token_id}
    if arch == "idefics3":
        from transformers import Idefics3Config, Idefics3ForConditionalGeneration, Idefics3Processor
        from transformers.models.idefics3 import Idefics3ImageProcessorPil

        model = Idefics3ForConditionalGeneration(
            Idefics3Config(
                vision_config=vision,
                text_config=text,
                scale_factor=2,
                image_token_id=tok.convert_tokens_to_ids("<image>"),
            )
        )
        processor = Idefics3Processor(
            image_processor=Idefics3ImageProcessorPil(**sizes),
            tokenizer=tok,
            image_seq_len=4,
            chat_template=TEMPLATES[arch],
        )
    else:
        from transformers import (
            SmolVLMConfig,
            SmolVLMForConditionalGeneration,
            SmolVLMProcessor,
            SmolVLMVideoProcessor,
        )
        from transformers.models.smolvlm import SmolVLMImageProcessorPil

        model = SmolVLMForConditionalGeneration(
            SmolVLMConfig(
                vision_config=vision,
                text_config=text,
                scale_factor=2,
                image_token_id=tok.convert_tokens_to_ids("<image>"),
            )
        )
        processor = SmolVLMProcessor(
            image_processor=SmolVLMImageProcessorPil(**sizes),
            tokenizer=tok,
            video_processor=SmolVLMVideoProcessor(),
            image_seq_len=4,
            chat_template=TEMPLATES[arch],
        )
    return _finish(model, processor, tok, "<end_of_utterance>", path)


def tiny_idefics3(path: Path) -> Path:
    """Idefics3: image splitting into tiles plus a global view, pixel shuffle."""
    return _idefics(path, "idefics3")


def tiny_smolvlm(path: Path) -> Path:
    """SmolVLM: Idefics3's layout with SmolVLM's processor (video processor included)."""
    return _idefics(path, "smolvlm")


def tiny_llava_onevision(path: Path) -> Path:
    """LLaVA-OneVision: SigLIP tower, any-resolution tiles on a grid of pinpoints."""
    from transformers import (
        LlavaOnevisionConfig,
        LlavaOnevisionForConditionalGeneration,
        LlavaOnevisionProcessor,
        LlavaOnevisionVideoProcessor,
    )
    from transformers.models.llava_onevision import LlavaOnevisionImageProcessorPil

    tok = word_tokenizer(
        ["<|im_start|>", "<|im_end|>", "<image>", "<video>", "<|endoftext|>"],
        "<|endoftext|>",
        "<|im_end|>",
        pad="<|endoftext|>",
    )
    grid = [[32, 32], [32, 64], [64, 32], [64, 64]]
    config = LlavaOnevisionConfig(
        vision_config={**VISION, "model_type": "siglip_vision_model"},
        text_config={
            **TEXT,
            "model_type": "qwen2",
            "vocab_size": len(tok),
            "pad_token_id": tok.pad_token_id,
        },
        image_token_index=tok.convert_tokens_to_ids("<image>"),
        video_token_index=tok.convert_tokens_to_ids("<video>"),
        image_grid_pinpoints=grid,
        vision_feature_select_strategy="full",
    )
    model = LlavaOnevisionForConditionalGeneration(config)
    image_processor = LlavaOnevisionImageProcessorPil(
        size={"height": 32, "width": 32},
        crop_size={"height": 32, "width": 32},
        image_grid_pinpoints=grid,
    )
    processor = LlavaOnevisionProcessor(
        image_processor=image_processor,
        tokenizer=tok,
        video_processor=LlavaOnevisionVideoProcessor(),
        num_image_tokens=16,
        vision_feature_select_strategy="full",
        vision_aspect_ratio="anyres_max_9",
        chat_template=TEMPLATES["llava-onevision"],
    )
    return _finish(model, processor, tok, "<|im_end|>", path)


def tiny_gemma3(path: Path) -> Path:
    """Gemma 3: SigLIP tower pooled to 4 soft tokens, bidirectional image attention."""
    from transformers import Gemma3Config, Gemma3ForConditionalGeneration, Gemma3Processor
    from transformers.models.gemma3 import Gemma3ImageProcessorPil

    names = {
        "boi_token": "<start_of_image>",
        "eoi_token": "<end_of_image>",
        "image_token": "<image_soft_token>",
    }
    tok = word_tokenizer(
        ["<start_of_turn>", "<end_of_turn>", *names.values()], "<bos>", "<end_of_turn>", attrs=names
    )
    config = Gemma3Config(
        vision_config=VISION,
        text_config={
            **TEXT,
            "vocab_size": len(tok),
            "head_dim": 16,
            "sliding_window": 16,
            "pad_token_id": tok.pad_token_id,
        },
        mm_tokens_per_image=4,
        boi_token_index=tok.convert_tokens_to_ids(names["boi_token"]),
        eoi_token_index=tok.convert_tokens_to_ids(names["eoi_token"]),
        image_token_index=tok.convert_tokens_to_ids(names["image_token"]),
    )
    model = Gemma3ForConditionalGeneration(config)
    processor = Gemma3Processor(
        image_processor=Gemma3ImageProcessorPil(size={"height": 32, "width": 32}),
        tokenizer=tok,
        image_seq_length=4,
        chat_template=TEMPLATES["gemma3"],
    )
    return _finish(model, processor, tok, "<end_of_turn>", path)


def tiny_paligemma2(path: Path, vision: dict | None = None) -> Path:
    """PaliGemma 2: SigLIP tower and a Gemma 2 decoder; a task prefix, no chat template.
    ``vision`` overrides the vision config (its ``image_size`` and ``patch_size`` set the
    processor's size and image tokens too)."""
    from transformers import PaliGemmaConfig, PaliGemmaForConditionalGeneration, PaliGemmaProcessor
    from transformers.models.siglip import SiglipImageProcessorPil

    vision = {**VISION, "projection_dim": 32, **(vision or {})}
    side = vision["image_size"]

    tok = word_tokenizer([], "<bos>", "<eos>")
    processor = PaliGemmaProcessor(
        image_processor=SiglipImageProcessorPil(
            size={"height": side, "width": side},
            image_seq_length=(side // vision["patch_size"]) ** 2,
        ),
        tokenizer=tok,
    )
    config = PaliGemmaConfig(
        vision_config=vision,
        text_config={
            **TEXT,
            "model_type": "gemma2",
            "vocab_size": len(tok),
            "head_dim": 16,
            "sliding_window": 16,
            "pad_token_id": tok.pad_token_id,
        },
        image_token_index=processor.image_token_id,
        projection_dim=32,
        hidden_size=32,
    )
    model = PaliGemmaForConditionalGeneration(config)
    # Gemma 2 caps its logits: wide weights saturate them to one token.
    return _finish(model, processor, tok, "<eos>", path, std=0.05)


BUILDERS: dict[str, Callable[[Path], Path]] = {
    "qwen2-vl": tiny_qwen2_vl,
    "qwen2.5-vl": tiny_qwen2_5_vl,
    "qwen3-vl": tiny_qwen3_vl,
    "idefics3": tiny_idefics3,
    "smolvlm": tiny_smolvlm,
    "llava-onevision": tiny_llava_onevision,
    "gemma3": tiny_gemma3,
    "paligemma2": tiny_paligemma2,
}


def check_shared_path(model: Any, images: list, questions: list[str], monkeypatch: Any) -> Any:
    """Run a chat adapter's requests with shared image features and without, and assert
    that each distinct image was encoded once, that the answers and replies are equal, and
    that the features each batch hands to ``generate`` equal what ``generate``'s own
    encoder call computes for that batch without sharing: features handed to the wrong
    request would show even where a tiny model's reply barely reads the image (Gemma 3
    pools random pixels to 4 tokens). Returns the shared run's answers and replies."""
    import functools

    import torch

    encoded: list = []
    handed: list = []
    computed: list = []
    encode = model._encode
    monkeypatch.setattr(model, "_encode", lambda ims: encoded.extend(ims) or encode(ims))
    generate = model.model.generate

    def handing(**kwargs: Any) -> Any:
        handed.append(kwargs.get("mm_encoder_outputs"))
        return generate(**kwargs)

    monkeypatch.setattr(model.model, "generate", handing)
    assert model.share_image_features
    shared = model.respond_all(images, questions)
    assert sorted(map(id, encoded)) == sorted({id(im) for im in images})
    base = model.model.base_model
    own = base.get_image_features
    # generate reads the encoder's signature to pick its arguments: keep it (wraps).
    recorded = functools.wraps(own)(lambda *a, **k: computed.append(own(*a, **k)) or computed[-1])
    monkeypatch.setattr(base, "get_image_features", recorded)
    monkeypatch.setattr(model, "share_image_features", False)
    assert shared == model.respond_all(images, questions)
    given = [h["image"] for h in handed if h]
    assert len(given) == len(computed) >= 2
    # Encoded in other batches: equal up to float32 rounding (Qwen's windowed attention).
    close = {"rtol": 1e-4, "atol": 1e-4}
    for got, want in zip(given, computed, strict=True):
        torch.testing.assert_close(
            _token_rows(got.pooler_output), _token_rows(want.pooler_output), **close
        )
        for g, w in zip(
            getattr(got, "deepstack_features", None) or [],
            getattr(want, "deepstack_features", None) or [],
            strict=True,
        ):
            torch.testing.assert_close(_token_rows(g), _token_rows(w), **close)
    return shared


def _token_rows(features: Any) -> Any:
    """Image-token rows in the order the placeholder tokens take them."""
    import torch

    if isinstance(features, torch.Tensor):
        return features.reshape(-1, features.shape[-1])
    return torch.cat([f.reshape(-1, f.shape[-1]) for f in features])
