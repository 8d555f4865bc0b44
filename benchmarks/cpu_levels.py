"""Do the default study's numbers depend on the CPU's vector instructions? Each run below
forces the kernels of torch, numpy, OpenBLAS and OpenCV to a lower instruction-set level
through their own environment variables, which is how another CPU of this project's kind
(an AVX2 machine without AVX-512, such as an AMD EPYC before Zen 4) or a baseline x86-64
one computes.

    .venv/bin/python benchmarks/cpu_levels.py corruptions
    .venv/bin/python benchmarks/cpu_levels.py answers
    .venv/bin/python benchmarks/cpu_levels.py study CHECKOUT (--level avx2 | --threads 2)

``corruptions`` corrupts 20 images of the default subset with every corruption of the
default at every severity, natively and at each level, and prints which (corruption,
severity) cells differ in a single byte. ``answers`` runs the two shipped checkpoints on
the clean default subset natively and at each level and prints how many answers differ
and the largest logit difference. ``study`` takes a checkout whose default study has
finished natively (``results/easy-vqa/robustness.duckdb``), copies it, forces every job
that computes on the CPU (corruption, inference, attention, question side, the
aggregation) to rerun under a level (or with ``--threads`` inference threads), and checks
the copy's summary block against the native one with ``vqarobust summary --check``: the
diff it prints is every number that moved.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Per level, the variables that lower each library's kernels. torch reads
# ATEN_CPU_CAPABILITY, numpy NPY_DISABLE_CPU_FEATURES, OpenBLAS OPENBLAS_CORETYPE and
# OpenCV OPENCV_CPU_DISABLE (features it does not know are warned of and ignored).
LEVELS = {
    "avx2": {
        "ATEN_CPU_CAPABILITY": "avx2",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR",
        "OPENBLAS_CORETYPE": "Haswell",
        "OPENCV_CPU_DISABLE": "AVX512_SKX,AVX512_COMMON,AVX512_ICL",
    },
    "default": {
        "ATEN_CPU_CAPABILITY": "default",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR X86_V3",
        "OPENBLAS_CORETYPE": "Prescott",
        "OPENCV_CPU_DISABLE": "AVX512_SKX,AVX512_COMMON,AVX512_ICL,AVX2,FMA3,AVX,FP16,POPCNT,"
        "SSE4_2,SSE4_1,SSSE3",
    },
}


def _digests(images: str, n: int) -> dict[str, str]:
    """SHA-256 (first 16 hex digits) of ``n`` images corrupted per (corruption, severity)."""
    from vqarobust import store
    from vqarobust.config import load_config
    from vqarobust.corruptions import corrupt_item, max_severity

    rows = []
    for row in store.iter_images(images):
        rows.append((row["image_id"], store.decode_image(row["bytes"])))
        if len(rows) == n:
            break
    out = {}
    for name in load_config("config/config.yaml")["corruptions"]:
        for severity in range(1, max_severity(name) + 1):
            h = hashlib.sha256()
            for image_id, image in rows:
                h.update(corrupt_item(image, name, severity, 0, image_id).tobytes())
            out[f"{name}/{severity}"] = h.hexdigest()[:16]
    return out


def _answers(images: str, questions: str) -> dict[str, object]:
    """Each shipped checkpoint's answers and logits on a prepared subset."""
    import numpy as np
    import torch

    from vqarobust.inference import Subset, predict_subset
    from vqarobust.models import load_model
    from vqarobust.store import read_questions

    torch.set_num_threads(1)
    q = read_questions(questions)
    out: dict[str, object] = {}
    for name in ("cnn-bow", "vilt-tiny"):
        path = f"checkpoints/easy-vqa/{name}"
        model = load_model({"family": "vqa-classifier", "path_or_id": path, "batch_size": 256})
        logits: list[np.ndarray] = []
        forward = model.model.forward

        def keep(*args, _forward=forward, _logits=logits, **kwargs):  # noqa: ANN002, ANN003, ANN202
            result = _forward(*args, **kwargs)
            _logits.append(result.logits.detach().numpy().copy())
            return result

        model.model.forward = keep
        preds = predict_subset(model, q, Subset("clean", 0, images), name)
        out[name] = {
            "answers": preds.column("answer").to_pylist(),
            "logits": np.concatenate(logits).tolist(),
        }
    return out


def _per_level(call: str) -> dict[str, object]:
    """``call`` (an expression of this module's names, given the prepared default subset's
    ``images`` and ``questions`` paths) evaluated in a fresh process natively and at each
    level; its JSON result per level."""
    from vqarobust.datasets import PreparedOutputs, prepare_dataset

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prepare_dataset(
            "easy-vqa",
            PreparedOutputs(
                root / "q.parquet", root / "images", root / "manifest.txt", root / "dataset.json"
            ),
            split="test",
            n_images=200,
            seed=0,
        )
        found = {}
        for level in ("native", *LEVELS):
            env = {**os.environ, **LEVELS.get(level, {})}
            code = (
                f"import json, sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
                "from cpu_levels import _answers, _digests; "
                f"images, questions = {str(root / 'images')!r}, "
                f"{str(root / 'q.parquet')!r}; print(json.dumps({call}))"
            )
            done = subprocess.run(
                [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
            )
            found[level] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def answers() -> None:
    """The checkpoints' answers and logits on the default subset, natively and per level."""
    import numpy as np

    found = _per_level("_answers(images, questions)")
    for level in LEVELS:
        for name, native in found["native"].items():
            other = found[level][name]
            changed = sum(a != b for a, b in zip(native["answers"], other["answers"], strict=True))
            gap = np.abs(np.array(native["logits"]) - np.array(other["logits"])).max()
            print(
                f"{level}: {name}: {changed} of {len(native['answers'])} clean answers "
                f"differ; largest logit difference {gap:.2e}"
            )


def corruptions(n: int) -> None:
    """Which (corruption, severity) cells of ``n`` images differ per level."""
    found = _per_level(f"_digests(images, {n})")
    cells = len(found["native"])
    for level in LEVELS:
        differ = [k for k, v in found["native"].items() if found[level][k] != v]
        print(
            f"{level}: {len(differ)} of {cells} (corruption, severity) cells differ on {n} "
            f"images{': ' + ', '.join(differ) if differ else ''}"
        )


def study(checkout: Path, level: str | None, threads: int | None) -> int:
    database = checkout / "results" / "easy-vqa" / "robustness.duckdb"
    if not database.is_file():
        raise SystemExit(f"{database}: run the default study there first")
    with tempfile.TemporaryDirectory(dir=checkout.parent) as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(checkout, copy, symlinks=True, ignore=shutil.ignore_patterns(".venv"))
        # Finished inference chunks and attention maps are reused by content, and the
        # kernel level is not part of that content: without this, the forced rerun would
        # answer and draw nothing.
        results = copy / "results"
        kept = sorted(
            [*results.glob("*/predictions/*/*.chunks"), *results.glob("*/attention/*.chunks")]
        )
        for folder in kept:
            shutil.rmtree(folder)
        print(f"removed {len(kept)} folders of finished inference chunks and maps from the copy")
        env = {**os.environ, **(LEVELS[level] if level else {})}
        command = [
            str(Path(sys.executable).parent / "snakemake"),
            "--cores",
            "2",
            "--forcerun",
            "corrupt_images",
            "perturb_questions",
            "embed_pool",
            "embed_questions",
            "rank_basic_questions",
            "noise_questions",
            "run_model",
            "analyze",
            "load_duckdb",
        ]
        if (copy / "logs" / "easy-vqa" / "image_attention").is_dir():
            # Per-subset inference (inference_jobs: subset): the maps are a job of their
            # own. Snakemake takes a rule it does not know for a file name, silently.
            command.insert(command.index("analyze"), "image_attention")
        if threads:
            command += ["--config", f"threads={{infer: {threads}}}"]
        subprocess.run(command, cwd=copy, env=env, check=True, capture_output=True)
        reused = [
            p.name
            for p in (copy / "logs").rglob("run_model/**/*.log")
            if "reusing" in p.read_text()
        ]
        if reused:
            raise SystemExit(f"inference reused finished chunks in {reused}")
        what = f"level {level}" if level else f"{threads} inference threads"
        print(f"{what}: the summary of a forced rerun against the native one")
        vqarobust = str(Path(sys.executable).parent / "vqarobust")
        native = Path(tmp) / "native.md"
        with native.open("w") as fh:
            subprocess.run(
                [vqarobust, "summary", "results/easy-vqa/robustness.duckdb", "--markdown"],
                cwd=checkout,
                stdout=fh,
                check=True,
            )
        done = subprocess.run(
            [vqarobust, "summary", "results/easy-vqa/robustness.duckdb", "--check", str(native)],
            cwd=copy,
            text=True,
            capture_output=True,
        )
        print(done.stdout + done.stderr, end="")
        return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("corruptions")
    p.add_argument("--images", type=int, default=20)
    sub.add_parser("answers")
    p = sub.add_parser("study")
    p.add_argument("checkout", type=Path)
    p.add_argument("--level", choices=sorted(LEVELS))
    p.add_argument("--threads", type=int)
    args = parser.parse_args()
    if args.command == "corruptions":
        corruptions(args.images)
        return 0
    if args.command == "answers":
        answers()
        return 0
    if (args.level is None) == (args.threads is None):
        parser.error("study: give --level or --threads")
    return study(args.checkout.resolve(), args.level, args.threads)


if __name__ == "__main__":
    sys.exit(main())
