"""Is training bit-reproducible? Same thread count twice, and 1 vs 2 threads.

    .venv/bin/python benchmarks/training_reproducibility.py [WORKDIR]

Prepares 400 easy-VQA training images, trains each reference architecture (small
sizes, one epoch) three times: twice with one thread, once with two, and compares the
saved weights (SHA-256 over all tensors, and the largest absolute difference).
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from pathlib import Path

from safetensors.torch import load_file

from vqarobust.datasets import PreparedOutputs, prepare_dataset
from vqarobust.models.recipe import Recipe
from vqarobust.models.training import train_reference_model

ARCHITECTURES = {
    "vilt": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2},
    "cnn-bow": {"channels": [8, 16], "hidden_dim": 32},
}


def weights(path: Path) -> tuple[str, dict]:
    tensors = load_file(next(path.glob("*.safetensors")))
    digest = hashlib.sha256()
    for key in sorted(tensors):
        digest.update(tensors[key].numpy().tobytes())
    return digest.hexdigest()[:16], tensors


def main(workdir: str | None = None) -> None:
    root = Path(workdir or tempfile.mkdtemp(prefix="vqarobust-repro-"))
    prepare_dataset(
        "easy-vqa",
        PreparedOutputs(root / "q.parquet", root / "img", root / "m.txt", root / "i.json"),
        split="train",
        n_images=400,
        seed=0,
    )
    for arch, kwargs in ARCHITECTURES.items():
        runs = {}
        for tag, threads in (("1 thread", 1), ("1 thread again", 1), ("2 threads", 2)):
            out = root / f"{arch}-{tag.replace(' ', '-')}"
            recipe = Recipe.of(arch, epochs=1, batch_size=32, threads=threads, **kwargs)
            train_reference_model(str(root / "q.parquet"), str(root / "img"), out, recipe)
            runs[tag] = weights(out)
        (h1, w1), (h2, _), (h3, w3) = runs.values()
        diff = max(float((w1[k] - w3[k]).abs().max()) for k in w1)
        print(
            f"{arch}: 1 thread twice identical: {h1 == h2}; 1 vs 2 threads identical: "
            f"{h1 == h3} (max |difference| {diff:.2g})"
        )


if __name__ == "__main__":
    main(*sys.argv[1:])
