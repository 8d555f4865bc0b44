"""Questions per second and peak memory of each model family, per batch size, with and
without image-feature reuse, and the GPU-hours of config/paper.yaml they imply.

    .venv/bin/python benchmarks/gpu_throughput.py                       # tiny models, CPU
    .venv/bin/python benchmarks/gpu_throughput.py --scale real --device cuda   # on a GPU
    .venv/bin/python benchmarks/gpu_throughput.py --scale hub --device cuda    # cached chat VLMs

``tiny``: the test suite's random tiny ViLT, BLIP, VLE, PNP-VQA and LLaVA, and its tiny
chat VLMs of each architecture (tests/tiny_vlms.py; the code paths, not the cost).
``hub``: the model repository's chat checkpoints of config/modern.yaml (Qwen2-VL 2B,
Qwen2.5-VL 3B, Qwen3-VL 2B, SmolVLM 256M, Idefics3 8B, LLaVA-OneVision 0.5B, PaliGemma 2
3B, Gemma 3 4B) with their real weights, from the local Hugging Face cache (fill it first
on a machine with network access; a missing one fails naming the ``hf download``).
``real``: the published architectures with random weights in bf16, written offline:
ViLT-B/32, BLIP base (ViT-B/16 at 384 px), VLE base (CLIP ViT-B/16 at 384 px, the
resolution of its VQA fine-tuning, + DeBERTa-v3-base + 6 fusion layers), PNP-VQA large
(two BLIP ViT-L/16 at 384 px with BERT-base text models, and T5-large; 100 captions per
question as in LAVIS), LLaVA-1.5 7B and 13B (CLIP ViT-L/14 at 336 px + Llama 7B/13B).
Cost does not depend on weight values, but output length does: the random LLaVA and
UnifiedQA are made to generate all their tokens (10 and 20), an upper bound on the 1-3
tokens real answers take; the random captioner samples 10-20 tokens per caption like the
real one. ``--count-only`` builds the real
architectures on the meta device and prints their parameter counts (no memory; runs
anywhere) to check the dimensions. Questions are asked about 640x480 photo-like images,
16,000 / 3,000 questions per image as in the paper protocol; the GPU-hours are
16,000 questions x 71 subsets / measured questions per second. On the CPU the memory
column is the process's peak RSS so far, not per row. For the chat families a column
sets the estimate of ``gpu_memory_gb: auto`` (weights and KV cache, without its 2 GB of
workspace) beside the measured peak. Each real checkpoint is written to
a temporary folder (25 GB for 13B) and removed after its rows.

``--json FILE`` also writes the rows as a throughput table (vqarobust.throughput: the
GPU, torch and transformers versions, this command, the questions per image and each
row's repository entry), which ``vqarobust gpu-hours`` and the config's
``resources.throughput`` read. ``--from-markdown TABLE.md --json FILE`` writes that table
from an earlier run's printed Markdown rows instead, with the machine given by ``--gpu``,
``--torch`` and ``--transformers`` (docs/results/gpu-throughput-h200.json comes from
docs/results/gpu-throughput-h200.md so).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

QUESTIONS = [
    "What is the man holding in his right hand?",
    "How many people are there?",
    "What color is the bus?",
    "Is there a clock on the tower?",
    "What sport is being played?",
    "Are the lights on?",
]
PAPER_QUESTIONS, PAPER_IMAGES, PAPER_SUBSETS = 16_000, 3_000, 71
REAL = ("vilt-b32", "blip-base", "vle-base", "pnp-vqa-large", "llava-1.5-7b", "llava-1.5-13b")
TINY = (
    "vilt",
    "blip",
    "vle",
    "pnp-vqa",
    "llava",
    "qwen2-vl",
    "qwen2.5-vl",
    "qwen3-vl",
    "idefics3",
    "smolvlm",
    "llava-onevision",
    "gemma3",
    "paligemma2",
)
# The model repository's chat checkpoints (config/modern.yaml), read from the local cache.
HUB = (
    "qwen2-vl-2b",
    "qwen2.5-vl-3b",
    "qwen3-vl-2b",
    "smolvlm-256m",
    "idefics3-8b",
    "llava-onevision-0.5b",
    "paligemma2-3b-mix-224",
    "gemma-3-4b-it",
)
TINY_PNP = {"block_num": 0, "num_captions": 5, "num_patches": 4}
# The model repository entry each real architecture stands for (the hub names are
# repository names themselves): the JSON table's ``repository``, by which
# ``vqarobust gpu-hours`` and ``resources.throughput`` price a config's models.
REPOSITORY = {
    "vilt-b32": "vilt-vqa",
    "blip-base": "blip-vqa-base",
    "vle-base": "vle-base-vqa",
    "pnp-vqa-large": "pnp-vqa-large",
    "llava-1.5-7b": "llava-1.5-7b",
    "llava-1.5-13b": "llava-1.5-13b",
    **{name: name for name in HUB},
}


def _tokenizer(extra: tuple[str, ...] = (), size: int = 0):  # noqa: ANN202
    """A word tokenizer of the benchmark's questions, padded with filler words ``w0``,
    ``w1``, ... to ``size`` entries, so that every id a random model samples decodes to a
    word (a random captioner's captions are then distinct, as real ones are)."""
    from tests.tiny_checkpoints import WORDS
    from vqarobust.models.vocab import SPECIAL_TOKENS, build_tokenizer

    words = {*WORDS, *extra, *" ".join(QUESTIONS).lower().replace("?", " ").split()}
    filler = [f"w{i}" for i in range(max(0, size - len(words) - len(SPECIAL_TOKENS) - 2))]
    return build_tokenizer([" ".join([*sorted(words), "?", *filler])])


def vle_base_config() -> dict:
    """The public ``config.json`` of VLE base for VQA: CLIP ViT-B/16 at 384 px,
    DeBERTa-v3-base, 6 fusion layers of width 768, VQAv2's 3,129 answers."""
    labels = {i: f"a{i}" for i in range(3129)}
    vision = {
        "model_type": "clip_vision_model",
        "hidden_size": 768,
        "intermediate_size": 3072,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "image_size": 384,
        "patch_size": 16,
        "projection_dim": 512,
    }
    text = {
        "model_type": "deberta-v2",
        "vocab_size": 128100,
        "hidden_size": 768,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "max_position_embeddings": 512,
        "relative_attention": True,
        "position_buckets": 256,
        "norm_rel_ebd": "layer_norm",
        "share_att_key": True,
        "pos_att_type": ["p2c", "c2p"],
        "position_biased_input": False,
        "type_vocab_size": 0,
        "layer_norm_eps": 1e-7,
    }
    return {
        "model_type": "vle",
        "vision_config": vision,
        "text_config": text,
        "hidden_size": 768,
        "num_hidden_layers": 6,
        "num_attention_heads": 12,
        "intermediate_size": 3072,
        "id2label": labels,
        "label2id": {v: k for k, v in labels.items()},
    }


def real_models(name: str) -> dict:
    """The published architecture of ``name`` with random weights (on the current device
    and dtype defaults): one model per checkpoint folder ("" for a single one)."""
    from transformers import (
        BlipConfig,
        BlipForConditionalGeneration,
        BlipForImageTextRetrieval,
        BlipForQuestionAnswering,
        CLIPVisionConfig,
        LlamaConfig,
        LlavaConfig,
        LlavaForConditionalGeneration,
        T5Config,
        T5ForConditionalGeneration,
        ViltConfig,
        ViltForQuestionAnswering,
    )

    if name == "vilt-b32":
        # dandelin/vilt-b32-finetuned-vqa: ViT-B/32 widths, 3,129 answers.
        labels = {i: f"a{i}" for i in range(3129)}
        config = ViltConfig(
            num_labels=3129, id2label=labels, label2id={v: k for k, v in labels.items()}
        )
        return {"": ViltForQuestionAnswering(config)}
    if name == "blip-base":
        return {"": BlipForQuestionAnswering(BlipConfig())}  # defaults: BLIP base, 384 px
    if name == "vle-base":
        from vqarobust.models.vle import VLEForVQA, config_from_dict

        return {"": VLEForVQA(config_from_dict(vle_base_config()))}
    if name == "pnp-vqa-large":
        # BLIP large (ViT-L/16 at 384 px, BERT-base text with cross-attention to width
        # 1024) for matching and captioning; UnifiedQA-v2 large is a T5-large.
        vision = {
            "hidden_size": 1024,
            "intermediate_size": 4096,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "image_size": 384,
            "patch_size": 16,
        }
        text = {"vocab_size": 30524, "num_attention_heads": 12, "encoder_hidden_size": 1024}
        return {
            "itm": BlipForImageTextRetrieval(BlipConfig(text_config=text, vision_config=vision)),
            "caption": BlipForConditionalGeneration(
                BlipConfig(text_config=text, vision_config=vision)
            ),
            "qa": T5ForConditionalGeneration(
                T5Config(
                    vocab_size=32128, d_model=1024, d_ff=4096, d_kv=64, num_layers=24, num_heads=16
                )
            ),
        }
    width = {"llava-1.5-7b": (4096, 32, 32, 11008), "llava-1.5-13b": (5120, 40, 40, 13824)}
    hidden, layers, heads, mlp = width[name]
    vision = CLIPVisionConfig(
        hidden_size=1024,
        intermediate_size=4096,
        num_hidden_layers=24,
        num_attention_heads=16,
        image_size=336,
        patch_size=14,
        projection_dim=768,
    )
    text = LlamaConfig(
        vocab_size=32064,
        hidden_size=hidden,
        intermediate_size=mlp,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        max_position_embeddings=4096,
    )
    config = LlavaConfig(
        vision_config=vision,
        text_config=text,
        image_token_id=32000,
        vision_feature_layer=-2,
        vision_feature_select_strategy="default",
        projector_hidden_act="gelu",
    )
    return {"": LlavaForConditionalGeneration(config)}


def count_real() -> None:
    import torch

    for name in REAL:
        with torch.device("meta"):
            models = real_models(name)
        n = sum(p.numel() for m in models.values() for p in m.parameters())
        print(f"{name}: {n / 1e9:.3f} B parameters ({2 * n / 2**30:.1f} GiB in bf16)")


def write_real(name: str, folder: Path, device: str) -> dict:
    """Save the random real-size model with a word tokenizer and the family's processor;
    the entry to load it."""
    import torch

    with torch.device(device):
        torch.set_default_dtype(torch.bfloat16)
        models = real_models(name)
        torch.set_default_dtype(torch.float32)
    if name == "vle-base":
        entry = _save_vle(models[""], folder)
    elif name == "pnp-vqa-large":
        entry = _save_pnp(models, folder)
    else:
        entry = _save_hf(name, models[""], folder)
    del models
    return {**entry, "dtype": "bfloat16"}


def _save_hf(name: str, model, folder: Path) -> dict:  # noqa: ANN001
    from transformers import BlipProcessor, ViltProcessor
    from transformers.models.blip import BlipImageProcessorPil
    from transformers.models.vilt import ViltImageProcessorPil

    from tests.tiny_checkpoints import llava_processor

    if name == "vilt-b32":
        tok = _tokenizer()
        proc = ViltProcessor(ViltImageProcessorPil(size={"shortest_edge": 384}), tok)
        entry = {"family": "vqa-classifier", "batch_size": 64}
    elif name == "blip-base":
        tok = _tokenizer()
        tok.add_special_tokens({"bos_token": "[DEC]"})
        model.config.text_config.bos_token_id = tok.convert_tokens_to_ids("[DEC]")
        proc = BlipProcessor(BlipImageProcessorPil(size={"height": 384, "width": 384}), tok)
        entry = {"family": "blip", "batch_size": 64, "max_new_tokens": 10}
    else:
        tok = _tokenizer(("answer", "single", "word", "phrase", "using", "user", "assistant"))
        tok.add_special_tokens({"additional_special_tokens": ["<image>"]})
        tok.model_max_length = 4096  # LLaVA's context; the word tokenizer's default is 40
        model.config.image_token_id = tok.convert_tokens_to_ids("<image>")
        # Never-generated end token: every answer takes all max_new_tokens (upper bound).
        model.generation_config.eos_token_id = model.config.text_config.vocab_size - 1
        model.generation_config.pad_token_id = tok.pad_token_id
        proc = llava_processor(tok, side=336, patch_size=14)
        entry = {"family": "llava", "batch_size": 16, "max_new_tokens": 10}
    model.save_pretrained(folder)
    proc.save_pretrained(folder)
    return {**entry, "path_or_id": str(folder)}


def _save_vle(model, folder: Path) -> dict:  # noqa: ANN001
    """The public VLE layout: config.json, safetensors under the public names."""
    import json

    from safetensors.torch import save_file
    from transformers.models.clip import CLIPImageProcessorPil

    from vqarobust.models.vle import public_name

    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(vle_base_config()))
    state = {public_name(k): v.contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(folder / "model.safetensors"))
    tok = _tokenizer()
    tok.model_max_length = 512
    tok.save_pretrained(folder)
    side = {"height": 384, "width": 384}
    CLIPImageProcessorPil(size={"shortest_edge": 384}, crop_size=side).save_pretrained(folder)
    return {"family": "vle", "path_or_id": str(folder), "batch_size": 32}


def _save_pnp(models: dict, folder: Path) -> dict:  # noqa: ANN001
    """Three folders; the random reader never ends early (20 answer tokens, upper bound)."""
    from transformers import BlipProcessor
    from transformers.models.blip import BlipImageProcessorPil

    entry = {"family": "pnp-vqa", "batch_size": 8}
    for part in ("itm", "caption"):
        # 30,522 words + [DEC] (+ [ENC] as the id after it): BLIP's 30,524 rows.
        tok = _tokenizer(("picture", "of"), size=30522)
        tok.add_special_tokens({"bos_token": "[DEC]"})
        tok.model_max_length = 512
        text = models[part].config.text_config
        text.bos_token_id = tok.convert_tokens_to_ids("[DEC]")
        text.sep_token_id, text.pad_token_id = tok.sep_token_id, tok.pad_token_id
        models[part].save_pretrained(folder / part)
        proc = BlipProcessor(BlipImageProcessorPil(size={"height": 384, "width": 384}), tok)
        proc.save_pretrained(folder / part)
        entry[f"{part}_model"] = str(folder / part)
    tok = _tokenizer(size=32100)  # T5's 32,128 rows include 28 unused
    tok.model_max_length = 512
    qa = models["qa"]
    qa.generation_config.eos_token_id = qa.config.vocab_size - 1
    qa.generation_config.decoder_start_token_id = tok.pad_token_id
    qa.generation_config.pad_token_id = tok.pad_token_id
    qa.save_pretrained(folder / "qa")
    tok.save_pretrained(folder / "qa")
    entry["qa_model"] = str(folder / "qa")
    return entry


def write_tiny(name: str, folder: Path) -> dict:
    from tests.tiny_checkpoints import tiny_blip, tiny_llava, tiny_pnp, tiny_vle
    from tests.tiny_vlms import BUILDERS

    if name in BUILDERS:
        path = BUILDERS[name](folder)
        return {"family": "image-text-to-text", "path_or_id": str(path), "max_new_tokens": 10}
    if name == "blip":
        return {"family": "blip", "path_or_id": str(tiny_blip(folder)), "max_new_tokens": 10}
    if name == "llava":
        return {"family": "llava", "path_or_id": str(tiny_llava(folder)), "max_new_tokens": 10}
    if name == "vle":
        return {"family": "vle", "path_or_id": str(tiny_vle(folder))}
    if name == "pnp-vqa":
        return {"family": "pnp-vqa", **tiny_pnp(folder), "pnp": TINY_PNP}
    from transformers import ViltProcessor
    from transformers.models.vilt import ViltImageProcessorPil

    from vqarobust.models.architectures import build_architecture

    tok = _tokenizer()
    size = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}
    model = build_architecture(
        "vilt", size, vocab_size=len(tok), labels=["yes", "no", "2", "red"], image_size=64
    )
    model.save_pretrained(folder)
    ViltProcessor(ViltImageProcessorPil(size={"shortest_edge": 64}), tok).save_pretrained(folder)
    return {"family": "vqa-classifier", "path_or_id": str(folder)}


def measure(entry: dict, device: str, batch: int, n_questions: int, reuse: bool | None) -> dict:
    """Questions per second and peak memory of ``answer_all`` on ``n_questions``."""
    import torch
    from PIL import Image

    from vqarobust.corruptions.samples import photo_like
    from vqarobust.models import load_model

    spec = {**entry, "batch_size": batch}
    if reuse is not None:
        spec["share_image_features"] = reuse
    model = load_model(spec, name="bench", device=device)
    per_image = PAPER_QUESTIONS / PAPER_IMAGES
    n_images = max(1, round(n_questions / per_image))
    images = [Image.fromarray(photo_like(480, 640, seed=i)) for i in range(n_images)]
    asked = [images[int(i / per_image) % n_images] for i in range(n_questions)]
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(n_questions)]
    model.answer_all(asked[:batch], questions[:batch])  # warm-up
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    model.answer_all(asked, questions)
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() / 2**30
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # process RSS
    rate = n_questions / (time.perf_counter() - t)
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return {"q_per_s": rate, "peak_gib": peak}


def estimated_gib(entry: dict, device: str, batch: int) -> float | None:
    """For a chat entry, the weights and KV cache that ``gpu_memory_gb: auto`` estimates
    (vqarobust.models.memory, without its workspace) in GiB, to set beside the measured
    peak; None for the other families."""
    if entry["family"] not in ("llava", "image-text-to-text"):
        return None
    from vqarobust.models.base import resolved_precision
    from vqarobust.models.memory import estimate_entry

    dtype = resolved_precision(entry, device)["dtype"]
    estimate = estimate_entry("bench", {**entry, "batch_size": batch}, dtype)
    return (estimate.weights_gb + estimate.kv_cache_gb) * 1e9 / 2**30


def machine(device: str) -> dict:
    """The GPU (or CPU), torch and transformers of this run, and the questions per image
    of its images."""
    import torch
    import transformers

    gpu = torch.cuda.get_device_name(device) if device.startswith("cuda") else "CPU"
    return {
        "gpu": gpu,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "questions_per_image": PAPER_QUESTIONS / PAPER_IMAGES,
    }


def write_json(path: str, rows: list[dict], where: dict, command: str) -> None:
    """The rows as a throughput table (checked as ``vqarobust gpu-hours`` reads it)."""
    from vqarobust.throughput import table_from_rows

    Path(path).write_text(table_from_rows(rows, where, command).to_json(), encoding="utf-8")


def from_markdown(args: argparse.Namespace) -> None:
    """The throughput table of an earlier run's printed Markdown."""
    from vqarobust.throughput import rows_from_markdown

    markdown = Path(args.from_markdown).read_text(encoding="utf-8")
    rows = rows_from_markdown(markdown, REPOSITORY)
    where = {
        "gpu": args.gpu,
        "torch": args.torch,
        "transformers": args.transformers,
        "questions_per_image": PAPER_QUESTIONS / PAPER_IMAGES,
    }
    source = f"benchmarks/gpu_throughput.py, rows of {args.from_markdown}"
    write_json(args.json, rows, where, source)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scale", choices=["tiny", "real", "hub"], default="tiny")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--models", default=None, help="comma-separated subset")
    parser.add_argument("--batch-sizes", default="1,8,32")
    parser.add_argument("--questions", type=int, default=64)
    parser.add_argument("--count-only", action="store_true")
    parser.add_argument("--json", metavar="FILE", help="also write the rows as a JSON table")
    parser.add_argument("--from-markdown", metavar="TABLE", help="convert printed rows to --json")
    for flag in ("--gpu", "--torch", "--transformers"):
        parser.add_argument(flag, help="with --from-markdown: the measuring machine's")
    args = parser.parse_args()
    if args.count_only:
        return count_real()
    if args.from_markdown:
        if not (args.json and args.gpu and args.torch and args.transformers):
            sys.exit("--from-markdown needs --json, --gpu, --torch and --transformers")
        return from_markdown(args)
    if args.scale == "real" and not args.device.startswith("cuda"):
        sys.exit("--scale real builds 0.1-13 B parameter models: run it with --device cuda")
    default = {"real": REAL, "hub": HUB, "tiny": TINY}[args.scale]
    names = args.models.split(",") if args.models else list(default)
    memory = "peak GPU GiB" if "cuda" in args.device else "peak RSS GiB"
    print(
        f"| model | batch | image-feature reuse | questions/s | {memory} | "
        "estimated GiB (weights + KV cache) | GPU-hours for paper.yaml |"
    )
    print("|---|---|---|---|---|---|---|")
    measured = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            folder = Path(tmp) / name
            if args.scale == "hub":
                from vqarobust.models.repository import resolve_spec

                entry = resolve_spec(name)
            elif args.scale == "real":
                entry = write_real(name, folder, args.device)
            else:
                entry = write_tiny(name, folder)
            shares = ("blip", "llava", "image-text-to-text", "vle", "pnp-vqa")
            reuse_options = [True, False] if entry["family"] in shares else [None]
            for batch in (int(b) for b in args.batch_sizes.split(",")):
                estimate = estimated_gib(entry, args.device, batch)
                estimated = "-" if estimate is None else f"{estimate:.2f}"
                for reuse in reuse_options:
                    r = measure(entry, args.device, batch, args.questions, reuse)
                    hours = PAPER_QUESTIONS * PAPER_SUBSETS / r["q_per_s"] / 3600
                    label = "-" if reuse is None else ("yes" if reuse else "no")
                    measured.append(
                        {
                            "model": name,
                            "repository": REPOSITORY.get(name),
                            "batch": batch,
                            "share_image_features": reuse,
                            "questions_per_s": round(r["q_per_s"], 3),
                            "peak_gib": round(r["peak_gib"], 3),
                        }
                    )
                    print(
                        f"| {name} | {batch} | {label} | {r['q_per_s']:.1f} | "
                        f"{r['peak_gib']:.2f} | {estimated} | {hours:.1f} |",
                        flush=True,
                    )
            shutil.rmtree(folder, ignore_errors=True)  # the 13B checkpoint alone: 25 GB
    if args.json:
        command = "python3 benchmarks/gpu_throughput.py " + " ".join(sys.argv[1:])
        write_json(args.json, measured, machine(args.device), command)


if __name__ == "__main__":
    main()
