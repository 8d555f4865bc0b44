"""Build tiny random-initialised Hugging Face checkpoints offline, for adapter tests."""

from __future__ import annotations

from pathlib import Path

from vqarobust.models.vocab import build_tokenizer

WORDS = [
    "what",
    "color",
    "is",
    "the",
    "shape",
    "there",
    "a",
    "circle",
    "red",
    "blue",
    "yes",
    "no",
    "does",
    "image",
    "contain",
    "triangle",
    "?",
    "2",
    "dog",
    "how",
    "many",
]


def tiny_blip(path: Path, vision: dict | None = None, seed: int = 0) -> Path:
    """A BlipForQuestionAnswering with 1-layer encoders and a BERT word tokenizer, its
    random weights drawn from ``seed`` (not from whatever the process drew before: the
    tests run on two workers in differing orders).

    ``vision`` overrides the vision config (e.g. a heavier tower for benchmarks).
    """
    import torch
    from transformers import BlipConfig, BlipForQuestionAnswering, BlipProcessor
    from transformers.models.blip import BlipImageProcessorPil

    torch.manual_seed(seed)

    tok = build_tokenizer([" ".join(WORDS)])
    tok.add_special_tokens({"bos_token": "[DEC]"})
    vocab = len(tok)
    defaults = {
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "image_size": 32,
        "patch_size": 8,
    }
    vision = {**defaults, **(vision or {})}
    # BLIP's answer decoder cross-attends to question embeddings with the vision width,
    # so the text side shares the vision hidden size.
    width = vision["hidden_size"]
    text = {
        "vocab_size": vocab,
        "hidden_size": width,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 2 * width,
        "encoder_hidden_size": width,
        "bos_token_id": tok.convert_tokens_to_ids("[DEC]"),
        "pad_token_id": tok.pad_token_id,
        "sep_token_id": tok.sep_token_id,
        "eos_token_id": tok.sep_token_id,
        "max_position_embeddings": 64,
    }
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


def llava_processor(tok, side: int, patch_size: int):
    """A LlavaProcessor: CLIP image processing at ``side`` pixels, the word tokenizer
    ``tok`` and the one-turn chat template."""
    from transformers import LlavaProcessor
    from transformers.models.clip import CLIPImageProcessorPil

    return LlavaProcessor(
        image_processor=CLIPImageProcessorPil(
            size={"shortest_edge": side}, crop_size={"height": side, "width": side}
        ),
        tokenizer=tok,
        patch_size=patch_size,
        vision_feature_select_strategy="default",
        chat_template=CHAT_TEMPLATE,
        num_additional_image_tokens=1,
    )


def tiny_llava(path: Path, seed: int = 0) -> Path:
    """A LlavaForConditionalGeneration with a 1-layer CLIP vision tower and Llama LM."""
    import torch
    from transformers import (
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
    )

    tok = build_tokenizer(
        [
            " ".join(
                [
                    *WORDS,
                    "user",
                    "assistant",
                    "answer",
                    "single",
                    "word",
                    "or",
                    "phrase",
                    "using",
                    "question",
                    ":",
                    ".",
                ]
            )
        ]
    )
    tok.add_special_tokens(
        {"additional_special_tokens": ["<image>"], "eos_token": "[SEP]", "bos_token": "[CLS]"}
    )
    image_token = tok.convert_tokens_to_ids("<image>")
    vision = CLIPVisionConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        image_size=32,
        patch_size=8,
        projection_dim=32,
    )
    text = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=256,
        pad_token_id=tok.pad_token_id,
        bos_token_id=tok.cls_token_id,
        eos_token_id=tok.sep_token_id,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=image_token,
        vision_feature_layer=-1,
        vision_feature_select_strategy="default",
    )
    # Seeded: the served tests count requests, and a blank answer is retried.
    with torch.random.fork_rng():
        torch.manual_seed(seed)
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
    config = T5Config(
        vocab_size=len(tok),
        d_model=32,
        d_ff=64,
        d_kv=16,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.sep_token_id,
        decoder_start_token_id=tok.pad_token_id,
    )
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
    dec_io = [
        (w4, w3),
        (w3, w3),
        (w3, w3),
        (w3, w3),
        (w3, w2),
        (w2, w2),
        (w2, w1),
        (w1, w1),
        (w1, 3),
    ]
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


def vle_public_names(vision_layers: int, text_layers: int, fusion_layers: int) -> list[str]:
    """Every tensor name of the public ``VLEForVQA`` checkpoint layout (``iflytek/VLE``,
    ``models/VLE/modeling_vle.py``, saved by transformers 4.x: CLIP under
    ``vision_model.vision_model``, position ids saved as buffers), written out here from
    that layout rather than from the package's module, so the name mapping is tested
    against an independent list."""
    wb = (".weight", ".bias")
    clip = [
        "embeddings.class_embedding",
        "embeddings.patch_embedding.weight",
        "embeddings.position_embedding.weight",
        "embeddings.position_ids",
        *(f"pre_layrnorm{s}" for s in wb),
        *(f"post_layernorm{s}" for s in wb),
    ]
    for i in range(vision_layers):
        parts = [
            "self_attn.k_proj",
            "self_attn.v_proj",
            "self_attn.q_proj",
            "self_attn.out_proj",
            "layer_norm1",
            "mlp.fc1",
            "mlp.fc2",
            "layer_norm2",
        ]
        clip += [f"encoder.layers.{i}.{p}{s}" for p in parts for s in wb]
    deberta = [
        "embeddings.word_embeddings.weight",
        "embeddings.position_ids",
        *(f"embeddings.LayerNorm{s}" for s in wb),
        "encoder.rel_embeddings.weight",
        *(f"encoder.LayerNorm{s}" for s in wb),
    ]
    for i in range(text_layers):
        parts = [
            "attention.self.query_proj",
            "attention.self.key_proj",
            "attention.self.value_proj",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm",
        ]
        deberta += [f"encoder.layer.{i}.{p}{s}" for p in parts for s in wb]
    names = [f"vle.vision_model.vision_model.{n}" for n in clip]
    names += [f"vle.text_model.{n}" for n in deberta]
    names += [
        f"vle.{p}{s}"
        for p in (
            "text_projection_layer",
            "image_projection_layer",
            "cross_modal_image_pooler.dense",
            "cross_modal_text_pooler.dense",
        )
        for s in wb
    ]
    names.append("vle.token_type_embeddings.weight")
    for stream in ("image", "text"):
        for i in range(fusion_layers):
            parts = [
                f"{a}.{p}"
                for a in ("attention", "crossattention")
                for p in (
                    "self.query",
                    "self.key",
                    "self.value",
                    "output.dense",
                    "output.LayerNorm",
                )
            ]
            parts += ["intermediate.dense", "output.dense", "output.LayerNorm"]
            names += [f"vle.cross_modal_{stream}_layers.{i}.{p}{s}" for p in parts for s in wb]
    names += [f"vqa_classifier.{i}{s}" for i in (0, 1, 3) for s in wb]
    return names


VLE_LABELS = ["yes", "no", "red", "blue", "circle", "triangle", "2"]


def tiny_vle(
    path: Path,
    fmt: str = "safetensors",
    seed: int = 0,
    extra: dict | None = None,
    drop: tuple[str, ...] = (),
) -> Path:
    """A random VLE VQA checkpoint in the public layout: ``config.json`` (model_type vle,
    CLIP vision and DeBERTa-v2 text configs, fusion settings, labels), the tensors of
    :func:`vle_public_names` as ``model.safetensors`` or a ``pytorch_model.bin`` state dict,
    a word tokenizer and CLIP's image processor. ``extra`` adds tensors, ``drop`` removes
    some (to test that the loader refuses them)."""
    import json

    import torch
    from transformers.models.clip import CLIPImageProcessorPil

    tok = build_tokenizer([" ".join(WORDS)])
    fusion = {
        "hidden_size": 24,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 48,
        "num_token_types": 2,
    }
    vision = {
        "model_type": "clip_vision_model",
        "hidden_size": 16,
        "intermediate_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "image_size": 32,
        "patch_size": 8,
    }
    text = {
        "model_type": "deberta-v2",
        "vocab_size": len(tok),
        "hidden_size": 20,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 40,
        "max_position_embeddings": 64,
        "relative_attention": True,
        "position_buckets": 8,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": ["p2c", "c2p"],
        "position_biased_input": False,
        "type_vocab_size": 0,
        "pad_token_id": tok.pad_token_id,
    }
    config = {
        "model_type": "vle",
        "architectures": ["VLEForVQA"],
        "vision_config": vision,
        "text_config": text,
        **fusion,
        "id2label": dict(enumerate(VLE_LABELS)),
        "label2id": {a: i for i, a in enumerate(VLE_LABELS)},
    }
    gen = torch.Generator().manual_seed(seed)
    shapes = _vle_shapes(vision, text, fusion, len(VLE_LABELS))
    state = {}
    for name in vle_public_names(1, 1, fusion["num_hidden_layers"]):
        if name.endswith("position_ids"):
            n = 16 + 1 if "vision" in name else text["max_position_embeddings"]
            state[name] = torch.arange(n).unsqueeze(0)
        elif (
            name.endswith("LayerNorm.weight")
            or "layer_norm" in name
            or name.endswith(("layrnorm.weight", "layernorm.weight", "vqa_classifier.1.weight"))
        ):
            state[name] = 1 + 0.1 * torch.randn(shapes(name), generator=gen)
        else:
            state[name] = 0.2 * torch.randn(shapes(name), generator=gen)
    state.update(extra or {})
    for name in drop:
        del state[name]
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config, indent=2))
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file({k: v.contiguous() for k, v in state.items()}, str(path / "model.safetensors"))
    else:
        torch.save(state, path / "pytorch_model.bin")
    tok.save_pretrained(path)
    CLIPImageProcessorPil(
        size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}
    ).save_pretrained(path)
    return path


def _vle_shapes(vision: dict, text: dict, fusion: dict, n_labels: int):
    """Shape of a public VLE tensor from the configs (the public layout's arithmetic)."""
    v, t, w = vision["hidden_size"], text["hidden_size"], fusion["hidden_size"]
    patches = (vision["image_size"] // vision["patch_size"]) ** 2 + 1

    def shape(name: str) -> tuple[int, ...]:
        bias = name.endswith(".bias")
        if name.startswith("vle.vision_model."):
            p, inner = vision["patch_size"], vision["intermediate_size"]
            table = {
                "class_embedding": (v,),
                "patch_embedding": (v, 3, p, p),
                "position_embedding": (patches, v),
                "fc1": (inner, v),
                "fc2": (v, inner),
            }
            for key, s in table.items():
                if key in name:
                    return (s[0],) if bias else s
            return (v,) if bias or "norm" in name else (v, v)
        if name.startswith("vle.text_model."):
            inner = text["intermediate_size"]
            if "word_embeddings" in name:
                return (text["vocab_size"], t)
            if "rel_embeddings" in name:
                return (2 * text["position_buckets"], t)
            if "intermediate.dense" in name:
                return (inner,) if bias else (inner, t)
            if "output.dense" in name and "attention" not in name:
                return (t,) if bias else (t, inner)
            return (t,) if bias or "LayerNorm" in name else (t, t)
        if "projection_layer" in name:
            d_in = t if "text" in name else v
            return (w,) if bias else (w, d_in)
        if "token_type" in name:
            return (fusion["num_token_types"], w)
        if name.startswith("vqa_classifier."):
            out = n_labels if ".3." in name else 2 * w
            return (out,) if bias or ".1." in name else (out, 2 * w)
        inner = fusion["intermediate_size"]
        if "intermediate.dense" in name:
            return (inner,) if bias else (inner, w)
        if name.split(".")[-2] == "dense" and ".output." in name and "attention" not in name:
            return (w,) if bias else (w, inner)
        return (w,) if bias or "LayerNorm" in name else (w, w)

    return shape


def _blip_parts(tok, layers: int = 2) -> tuple[dict, dict]:
    """Tiny BLIP text and vision configs sharing one width (BLIP's cross-attention needs it)."""
    vision = {
        "hidden_size": 32,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "image_size": 32,
        "patch_size": 8,
    }
    text = {
        "vocab_size": len(tok),
        "hidden_size": 32,
        "num_hidden_layers": layers,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "encoder_hidden_size": 32,
        "bos_token_id": tok.convert_tokens_to_ids("[DEC]"),
        "pad_token_id": tok.pad_token_id,
        "sep_token_id": tok.sep_token_id,
        "eos_token_id": tok.sep_token_id,
        "max_position_embeddings": 64,
    }
    return text, vision


# PNP-VQA's settings for the tiny checkpoints: GradCAM from the first text block, 5
# captions, each from 4 sampled patches, so that a question stays cheap.
TINY_PNP = {"block_num": 0, "num_captions": 5, "num_patches": 4}


def tiny_pnp(path: Path, enc_token: bool = True, seed: int = 0) -> dict[str, str]:
    """The three PNP-VQA checkpoints, tiny and random: a BlipForImageTextRetrieval (2 text
    blocks with cross-attention), a BlipForConditionalGeneration and a T5 reader. The ITM
    tokenizer has [DEC] and, with ``enc_token``, [ENC] (else [ENC] is the id after [DEC])."""
    import torch
    from transformers import (
        BlipConfig,
        BlipForConditionalGeneration,
        BlipForImageTextRetrieval,
        BlipProcessor,
    )
    from transformers.models.blip import BlipImageProcessorPil

    torch.manual_seed(seed)  # random weights, but the same in every run
    words = [*WORDS, "picture", "of", "on", "with", "and", "green", "square", "large", "small"]
    paths = {}
    for kind, cls in (
        ("itm", BlipForImageTextRetrieval),
        ("caption", BlipForConditionalGeneration),
    ):
        tok = build_tokenizer([" ".join(words)])
        tok.add_special_tokens({"bos_token": "[DEC]"})
        if kind == "itm" and enc_token:
            tok.add_special_tokens({"additional_special_tokens": ["[ENC]"]})
        text, vision = _blip_parts(tok)
        if kind == "itm" and not enc_token:
            text["vocab_size"] = len(tok) + 1  # room for LAVIS's [ENC] after [DEC]
        model = cls(BlipConfig(text_config=text, vision_config=vision))
        processor = BlipProcessor(
            image_processor=BlipImageProcessorPil(size={"height": 32, "width": 32}), tokenizer=tok
        )
        model.save_pretrained(path / kind)
        processor.save_pretrained(path / kind)
        paths[f"{kind}_model"] = str(path / kind)
    paths["qa_model"] = str(tiny_unifiedqa(path / "qa"))
    return paths


def tiny_unifiedqa(path: Path) -> Path:
    """A T5ForConditionalGeneration with a SentencePiece vocabulary (``spiece.model``
    trained here on :data:`WORDS`, loaded by ``T5Tokenizer`` as UnifiedQA's is)."""
    import sentencepiece as spm
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    path.mkdir(parents=True, exist_ok=True)
    words = [*WORDS, "picture", "of", "on", "with", "and", "green", "square", "large", "small"]
    corpus = [" ".join(words[i:] + words[:i]) for i in range(len(words))] * 20
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus),
        model_prefix=str(path / "spiece"),
        vocab_size=48,
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        minloglevel=2,
        num_threads=1,
    )
    tok = T5Tokenizer.from_pretrained(path)  # the folder holds spiece.model, like the Hub's
    config = T5Config(
        vocab_size=len(tok),
        d_model=32,
        d_ff=64,
        d_kv=16,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    model = T5ForConditionalGeneration(config)
    # A random reader's argmax is often a special token; suppress them so answers are words.
    model.generation_config.suppress_tokens = [i for i in tok.all_special_ids if i != 1]
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def random_images(n: int, size: tuple[int, int] = (40, 50)):
    """``n`` seeded random RGB images (one seed per image)."""
    import numpy as np
    from PIL import Image

    return [
        Image.fromarray(np.random.default_rng(i).integers(0, 255, (*size, 3), dtype=np.uint8))
        for i in range(n)
    ]


def tiny_lxmert(
    path: Path,
    dim: int = 8,
    answers: list[str] | None = None,
    id2label: bool = False,
    seed: int = 0,
) -> Path:
    """A random-init LxmertForQuestionAnswering (visual_feat_dim ``dim``) saved with its
    word-level tokenizer and, unless ``id2label``, an answers.json; with ``id2label`` the
    answers are in the config instead."""
    import json

    import torch
    from transformers import LxmertConfig, LxmertForQuestionAnswering

    from vqarobust.models.vocab import build_tokenizer

    answers = answers or ["yes", "no", "red", "circle"]
    torch.manual_seed(seed)
    extra = {"id2label": dict(enumerate(answers))} if id2label else {}
    config = LxmertConfig(
        vocab_size=40,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        l_layers=1,
        x_layers=1,
        r_layers=1,
        visual_feat_dim=dim,
        visual_pos_dim=4,
        num_qa_labels=len(answers),
        max_position_embeddings=40,
        **extra,
    )
    model = LxmertForQuestionAnswering(config).eval()
    model.save_pretrained(path)
    build_tokenizer(["is there a red circle", "what color is the star"]).save_pretrained(path)
    if not id2label:
        (path / "answers.json").write_text(json.dumps(answers))
    return path


def tiny_sentence_encoder(folder: Path) -> Path:
    """A random-init one-layer BERT with MiniLM's tokenizer and mean pooling, saved as a
    sentence-transformers model: another encoder than the shipped one."""
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import AutoTokenizer, BertConfig, BertModel

    from vqarobust.text.encoder import default_model_path

    torch.manual_seed(0)
    bert_dir = folder / "bert"
    tokenizer = AutoTokenizer.from_pretrained(default_model_path())
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=64,
    )
    BertModel(config).save_pretrained(bert_dir)
    tokenizer.save_pretrained(bert_dir)
    word = models.Transformer(str(bert_dir))
    model = SentenceTransformer(modules=[word, models.Pooling(32, "mean")], device="cpu")
    model.save(str(folder / "st"))
    return folder / "st"
