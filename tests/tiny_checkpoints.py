"""Build tiny random-initialised Hugging Face checkpoints offline, for adapter tests."""

from __future__ import annotations

from pathlib import Path

from vqarobust.models.vocab import build_tokenizer

WORDS = ["what", "color", "is", "the", "shape", "there", "a", "circle", "red", "blue", "yes",
         "no", "does", "image", "contain", "triangle", "?", "2", "dog", "how", "many"]  # fmt: skip


def tiny_blip(path: Path, vision: dict | None = None) -> Path:
    """A BlipForQuestionAnswering with 1-layer encoders and a BERT word tokenizer.

    ``vision`` overrides the vision config (e.g. a heavier tower for benchmarks).
    """
    from transformers import BlipConfig, BlipForQuestionAnswering, BlipProcessor
    from transformers.models.blip import BlipImageProcessorPil

    tok = build_tokenizer([" ".join(WORDS)])
    tok.add_special_tokens({"bos_token": "[DEC]"})
    vocab = len(tok)
    defaults = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                "intermediate_size": 64, "image_size": 32, "patch_size": 8}  # fmt: skip
    vision = {**defaults, **(vision or {})}
    # BLIP's answer decoder cross-attends to question embeddings with the vision width,
    # so the text side shares the vision hidden size.
    width = vision["hidden_size"]
    text = {"vocab_size": vocab, "hidden_size": width, "num_hidden_layers": 1,
            "num_attention_heads": 2, "intermediate_size": 2 * width,
            "encoder_hidden_size": width, "bos_token_id": tok.convert_tokens_to_ids("[DEC]"),
            "pad_token_id": tok.pad_token_id, "sep_token_id": tok.sep_token_id,
            "eos_token_id": tok.sep_token_id, "max_position_embeddings": 64}  # fmt: skip
    model = BlipForQuestionAnswering(BlipConfig(text_config=text, vision_config=vision))
    side = vision["image_size"]
    processor = BlipProcessor(
        image_processor=BlipImageProcessorPil(size={"height": side, "width": side}), tokenizer=tok
    )
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] | upper }}: "
    "{% for part in message['content'] %}{% if part['type'] == 'image' %}<image>\n"
    "{% else %}{{ part['text'] }}{% endif %}{% endfor %}\n{% endfor %}"
    "{% if add_generation_prompt %}ASSISTANT:{% endif %}"
)


def llava_processor(tok, side: int, patch_size: int):  # noqa: ANN001, ANN201
    """A LlavaProcessor: CLIP image processing at ``side`` pixels, the word tokenizer
    ``tok`` and the one-turn chat template."""
    from transformers import LlavaProcessor
    from transformers.models.clip import CLIPImageProcessorPil

    return LlavaProcessor(
        image_processor=CLIPImageProcessorPil(size={"shortest_edge": side},
                                           crop_size={"height": side, "width": side}),
        tokenizer=tok, patch_size=patch_size, vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE, num_additional_image_tokens=1,
    )  # fmt: skip


def tiny_llava(path: Path) -> Path:
    """A LlavaForConditionalGeneration with a 1-layer CLIP vision tower and Llama LM."""
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )

    tok = build_tokenizer([" ".join([*WORDS, "user", "assistant", "answer", "single", "word",
                                     "or", "phrase", "using", "question", ":", "."])])  # fmt: skip
    tok.add_special_tokens({"additional_special_tokens": ["<image>"], "eos_token": "[SEP]",
                            "bos_token": "[CLS]"})  # fmt: skip
    image_token = tok.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                              num_attention_heads=2, image_size=32, patch_size=8,
                              projection_dim=32)  # fmt: skip
    text = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                       num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=2,
                       max_position_embeddings=256, pad_token_id=tok.pad_token_id,
                       bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)  # fmt: skip
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=image_token,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    model = LlavaForConditionalGeneration(config)
    model.generation_config.eos_token_id = tok.sep_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    processor = llava_processor(tok, side=32, patch_size=8)
    model.save_pretrained(path)
    processor.save_pretrained(path)
    return path


def tiny_t5(path: Path) -> Path:
    """A T5ForConditionalGeneration with one layer each way and a BERT word tokenizer:
    a text-to-text model for the sentence-level rewrites."""
    from transformers import T5Config, T5ForConditionalGeneration

    tok = build_tokenizer([" ".join([*WORDS, "formal", "rewrite", ":"])])
    config = T5Config(vocab_size=len(tok), d_model=32, d_ff=64, d_kv=16, num_layers=1,
                      num_decoder_layers=1, num_heads=2, pad_token_id=tok.pad_token_id,
                      eos_token_id=tok.sep_token_id,
                      decoder_start_token_id=tok.pad_token_id)  # fmt: skip
    model = T5ForConditionalGeneration(config)
    model.generation_config.eos_token_id = tok.sep_token_id
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def tiny_adain(
    path: Path, widths: tuple[int, int, int, int] = (4, 8, 12, 16), seed: int = 0
) -> Path:
    """Random AdaIN weights in the public layout (``vgg_normalised.pth`` with every VGG-19
    conv up to relu5_4 under its nn.Sequential index, ``decoder.pth``), narrow channels."""
    import torch

    from vqarobust.corruptions.stylize import DECODER_CONVS, DEEPER_CONVS, ENCODER_CONVS

    w1, w2, w3, w4 = widths
    enc_io = [
        (3, 3, 1),
        (3, w1, 3),
        (w1, w1, 3),
        (w1, w2, 3),
        (w2, w2, 3),
        (w2, w3, 3),
        (w3, w3, 3),
        (w3, w3, 3),
        (w3, w3, 3),
        (w3, w4, 3),
    ] + [(w4, w4, 3)] * 7
    dec_io = [(w4, w3), (w3, w3), (w3, w3), (w3, w3), (w3, w2), (w2, w2), (w2, w1), (w1, w1),
              (w1, 3)]  # fmt: skip
    gen = torch.Generator().manual_seed(seed)

    def conv(c_in: int, c_out: int, k: int) -> tuple:
        scale = (2 / (c_in * k * k)) ** 0.5
        return torch.randn(c_out, c_in, k, k, generator=gen) * scale, torch.zeros(c_out)

    vgg, dec = {}, {}
    for i, (c_in, c_out, k) in zip(ENCODER_CONVS + DEEPER_CONVS, enc_io, strict=True):
        vgg[f"{i}.weight"], vgg[f"{i}.bias"] = conv(c_in, c_out, k)
    for i, (c_in, c_out) in zip(DECODER_CONVS, dec_io, strict=True):
        dec[f"{i}.weight"], dec[f"{i}.bias"] = conv(c_in, c_out, 3)
    path.mkdir(parents=True, exist_ok=True)
    torch.save(vgg, path / "vgg_normalised.pth")
    torch.save(dec, path / "decoder.pth")
    return path


def style_images(path: Path, n: int = 3) -> Path:
    """A folder of ``n`` generated style images of different sizes and textures."""
    import numpy as np
    from PIL import Image

    path.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    for k in range(n):
        h, w = 60 + 20 * k, 90 - 10 * k
        y, x = np.mgrid[0:h, 0:w]
        stripes = (np.sin(x / (2 + k)) + np.cos(y / (3 + k))) * 60 + 128
        image = np.stack([stripes, stripes[::-1], rng.uniform(0, 255, (h, w))], axis=-1)
        Image.fromarray(image.clip(0, 255).astype(np.uint8)).save(path / f"style{k}.png")
    return path
