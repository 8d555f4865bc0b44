"""Time of planning GQA-size feature swaps (rule swap_features) on a synthetic bank.

    .venv/bin/python -u benchmarks/gqa_swaps.py [--images 1000] [--k 10]

config/gqa.yaml evaluates 1,000 validation images (about 12 questions each). GQA's files
are not on this machine, so the bank is synthetic at that size: 36 detections per image
(LXMERT's obj36), 16 scene-graph objects per image of which each detection matches one
with probability 0.6 (the rest unmatched), 1,000 class names and 600 attribute names
(0-3 attributes per object), 1-2 objects selected per question, word vectors of 300
dimensions in a GloVe text file (random). Planning does not read feature rows, so they
have 16 dimensions here. Each bank is planned twice, each in its own process (so that
each peak is its own): with every context object swapped (``context.max_objects: null``,
the paper's rule and config/gqa.yaml's) and with the first 6 (the cap this project used
before). Prints one Markdown table: bank, mode, objects swapped, questions, context
objects per question, swaps, seconds, peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from vqarobust.context.feature_swaps import QuestionContext
from vqarobust.features.table import FeatureTable, feature_table
from vqarobust.materialize.feature_context import FeatureSwapSettings, plan_feature_swaps


def synthetic_bank(
    n_images: int,
    rows: int,
    match: float,
    rng: np.random.Generator,
    classes: list[str],
    attributes: list[str],
) -> FeatureTable:
    """A bank of ``rows`` rows per image; each row labelled with probability ``match``."""
    out = []
    for image in range(n_images):
        for row in range(rows):
            labelled = rng.random() < match
            attrs = sorted(set(rng.choice(attributes, size=int(rng.integers(0, 4)))))
            out.append(
                {
                    "image_id": image,
                    "object_index": row,
                    "object_id": str(row) if labelled else None,
                    "box": [0.0, 0.0, 0.1, 0.1],
                    "class": str(rng.choice(classes)) if labelled else None,
                    "attributes": attrs if labelled else None,
                    "feature": rng.normal(size=16).astype(np.float32).tolist(),
                }
            )
    return FeatureTable(feature_table(out))


BANKS = {
    "obj36": ("obj36 (36 detections, 60% matched)", 36, 0.6, "donor"),
    "sight": ("perfect sight (16 objects)", 16, 1.0, "labels"),
}
CAPS = (None, 6)


def plan_one(bank_name: str, max_objects: int | None, images: int, per_image: int, k: int) -> dict:
    """Plan one bank's swaps with one cap; what the table prints of it."""
    label, rows, match, mode = BANKS[bank_name]
    rng = np.random.default_rng(0)
    classes = [f"class{i:04d}" for i in range(1000)]
    attributes = [f"attr{i:03d}" for i in range(600)]
    with tempfile.TemporaryDirectory() as tmp:
        glove = Path(tmp) / "vectors.txt"
        with glove.open("w") as fh:
            for name in classes + attributes:
                fh.write(name + " " + " ".join(f"{v:.4f}" for v in rng.normal(size=300)) + "\n")
        bank = synthetic_bank(images, rows, match, rng, classes, attributes)
        if mode == "labels":
            bank.vocab = {n: rng.normal(size=300).astype(np.float32) for n in classes + attributes}
        contexts = []
        for image in range(images):
            labels = bank.labels(image)
            matched = [i for i, (c, _, _) in enumerate(labels) if c is not None]
            for n in range(per_image):
                chosen = set(rng.choice(matched, size=int(rng.integers(1, 3)), replace=False))
                excluded = frozenset(labels[i][0] for i in chosen)
                contexts.append(
                    QuestionContext(
                        image * 100 + n,
                        image,
                        tuple(i for i in matched if i not in chosen),
                        excluded,
                        frozenset(a for i in chosen for a in labels[i][1]),
                    )
                )
        settings = FeatureSwapSettings(mode, seed=0, k=k, max_objects=max_objects)
        started = time.perf_counter()
        planned = plan_feature_swaps(
            contexts, bank, ["swap_class", "swap_attribute"], settings, str(glove)
        )
        seconds = time.perf_counter() - started
    return {
        "bank": label,
        "mode": mode,
        "cap": max_objects,
        "questions": len(contexts),
        "objects": float(np.mean([len(c.context) for c in contexts])),
        "swaps": len(planned),
        "top": max(r["severity"] for r in planned),
        "seconds": seconds,
        "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=1000)
    parser.add_argument("--questions-per-image", type=int, default=12)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--one", nargs=2, metavar=("BANK", "CAP"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [
        "--images",
        str(args.images),
        "--questions-per-image",
        str(args.questions_per_image),
        "--k",
        str(args.k),
    ]
    if args.one:
        bank, cap = args.one
        print(
            json.dumps(
                plan_one(
                    bank,
                    None if cap == "none" else int(cap),
                    args.images,
                    args.questions_per_image,
                    args.k,
                )
            )
        )
        return
    print(
        "| bank | mode | objects swapped | questions | context objects per question | "
        "swaps | highest severity | seconds | peak memory |\n|---|---|---|---|---|---|---|---|---|"
    )
    for bank in BANKS:
        for cap in CAPS:
            out = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    *sizes,
                    "--one",
                    bank,
                    "none" if cap is None else str(cap),
                ],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            swapped = "every one" if r["cap"] is None else f"first {r['cap']}"
            print(
                f"| {r['bank']} | {r['mode']} | {swapped} | {r['questions']:,} | "
                f"{r['objects']:.1f} | {r['swaps']:,} | {r['top']} | {r['seconds']:.1f} | "
                f"{r['peak_mb'] / 1024:.1f} GB |",
                flush=True,
            )


if __name__ == "__main__":
    main()
