"""GPU memory and GPU-hours of the paper protocol, estimated from model sizes.

    .venv/bin/python benchmarks/gpu_estimate.py [--utilization 0.4] [--peak-tflops 312]

No GPU was available to measure these; they are arithmetic from public parameter counts,
the token counts of each model's inputs and an assumed share of the GPU's peak bf16
throughput (default: A100, 312 TFLOP/s, 40% for the LLaVA prefills, 10% for the small
encoders whose batches are dominated by overheads, and for PNP-VQA, whose sampled
captions run many short decoder steps). Assumptions, all printed:

* compute ~ 2 x parameters x tokens per forward pass (dense matmuls; attention's own
  FLOPs are a few percent at these lengths); image encoders run once per distinct image
  (the adapters share features), language models once per question;
* answers are 1-3 tokens: decoding adds steps that read the weights from memory
  (bandwidth-bound, 2 TB/s on an A100), divided over the batch;
* memory = bf16 weights + KV cache / activations of one batch + 2 GB of workspace.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

QUESTIONS, IMAGES, SUBSETS = 16_000, 3_000, 71
BANDWIDTH = 2.0e12  # bytes/s, A100 80GB HBM2e
WORKSPACE_GB = 2.0


@dataclass(frozen=True)
class Model:
    name: str
    vision_params: float  # parameters that see the image alone (shared per image)
    vision_tokens: int
    qa_params: float  # parameters run per question
    qa_tokens: int  # tokens per question through qa_params
    decode_steps: int  # generated tokens (0 for a classifier)
    batch: int  # batch size of the model repository entry
    layers: int = 0  # language-model layers, for the KV cache
    hidden: int = 0
    small: bool = False  # small encoder: low utilization
    extra_flops: float = 0.0  # per question, beyond 2 x qa_params x qa_tokens
    extra_params: float = 0.0  # weights outside vision_params and qa_params


MODELS = (
    # ViLT-B/32: one transformer over 192 patches (640x480 -> 384x512) + ~40 text tokens.
    Model("vilt-vqa", 0.0, 0, 87.4e6, 233, 0, 64, small=True),
    # BLIP base: ViT-B/16 at 384 px (577 tokens) once per image; text encoder + decoder
    # (~ 2 x 137M) over ~15 question tokens with cross-attention, ~3 answer tokens.
    Model("blip-vqa-base", 86e6, 577, 274e6, 15, 3, 64, small=True),
    # LLaVA-1.5: CLIP ViT-L/14 at 336 px (577 tokens) once per image; the LM prefills
    # 576 image tokens + ~45 prompt tokens per question.
    Model("llava-1.5-7b", 304e6, 577, 6.76e9, 621, 3, 16, layers=32, hidden=4096),
    Model("llava-1.5-13b", 304e6, 577, 13.05e9, 621, 3, 8, layers=40, hidden=5120),
    # VLE base: CLIP ViT-B/16 (577 tokens at an assumed 384 px) once per image; per
    # question the image stream of the 6 fusion layers (57M) runs over those 577 tokens,
    # DeBERTa-v3-base (86M without embeddings) and the text stream over ~20 tokens.
    Model(
        "vle-base-vqa",
        86e6,
        577,
        57e6,
        577,
        0,
        32,
        small=True,
        extra_flops=2 * (86e6 + 57e6) * 20,
        extra_params=98e6 + 57e6 + 7e6,
    ),
    # PNP-VQA large: two ViT-L/16 at 384 px (ITM and captioner) once per image; per
    # question UnifiedQA-v2 large's encoder (335M) over 100 contexts of ~30 tokens, the
    # caption decoder (~170M with cross-attention) over 100 captions of ~20 tokens, the
    # ITM text encoder forward and backward (~3x a forward over ~12 tokens); ~16 sampled
    # caption steps and ~3 answer steps read the weights.
    Model(
        "pnp-vqa-large",
        2 * 303e6,
        577,
        335e6,
        3000,
        19,
        8,
        small=True,
        extra_flops=2 * 170e6 * 100 * 20 + 3 * 2 * 170e6 * 12,
        extra_params=2 * 170e6 + 400e6,
    ),
)


def estimate(m: Model, utilization: float, small_utilization: float, peak: float) -> dict:
    """GPU memory (GB) and GPU-hours of one model over every subset."""
    n_q, n_img = QUESTIONS * SUBSETS, IMAGES * SUBSETS
    flops = 2 * m.vision_params * m.vision_tokens * n_img
    flops += (2 * m.qa_params * m.qa_tokens + m.extra_flops) * n_q
    rate = peak * (small_utilization if m.small else utilization)
    weight_bytes = 2 * (m.vision_params + m.qa_params + m.extra_params)
    decode_seconds = m.decode_steps * weight_bytes / BANDWIDTH * n_q / m.batch
    seconds = flops / rate + decode_seconds
    kv = 2 * m.layers * m.hidden * 2 * (m.qa_tokens + m.decode_steps) * m.batch
    memory = (weight_bytes + kv) / 1e9 + WORKSPACE_GB
    per_job_h = seconds / SUBSETS * 5 / 3600  # one corrupted subset: five severities
    return {
        "name": m.name,
        "pflop": flops / 1e15,
        "gpu_h": seconds / 3600,
        "gpu_gb": memory,
        "job_h": per_job_h,
        "weights_gb": weight_bytes / 1e9,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--utilization", type=float, default=0.4)
    p.add_argument("--small-utilization", type=float, default=0.1)
    p.add_argument("--peak-tflops", type=float, default=312.0)
    a = p.parse_args()
    peak = a.peak_tflops * 1e12
    print(
        f"{QUESTIONS} questions x {SUBSETS} subsets, {IMAGES} images; peak "
        f"{a.peak_tflops:.0f} TFLOP/s at {a.utilization:.0%} (LLaVA) / "
        f"{a.small_utilization:.0%} (ViLT, BLIP, VLE, PNP-VQA)"
    )
    print("| model | compute (PFLOP) | GPU-hours | GPU memory (GB) | per corrupted-subset job |")
    print("|---|---|---|---|---|")
    total = 0.0
    for m in MODELS:
        e = estimate(m, a.utilization, a.small_utilization, peak)
        total += e["gpu_h"]
        print(
            f"| {e['name']} | {e['pflop']:,.0f} | {e['gpu_h']:.1f} | {math.ceil(e['gpu_gb'])} "
            f"| {e['job_h'] * 60:.0f} min |"
        )
    print(f"| all {len(MODELS)} | | {total:.1f} | | |")


if __name__ == "__main__":
    main()
