"""Time of SwapMix training at the feature level vs plain training (the paper reports
1.4x), for the LXMERT of config/scenes-features.yaml on a run's training feature tables.

    .venv/bin/python -u benchmarks/swapmix_training.py [RUN_DIR] [--epochs 2]

RUN_DIR is a working directory where the scenes-features study ran (default: .). Each
source's model is trained plain, then with SwapMix (k = 10), one after the other on one
thread, for the same number of steps; one Markdown table of seconds and the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import yaml

from vqarobust.models.feature_training import train_feature_model
from vqarobust.models.recipe import Recipe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", nargs="?", default=".")
    parser.add_argument("--epochs", type=float, default=2.0)
    args = parser.parse_args()
    run = Path(args.run_dir)
    config = yaml.safe_load(Path("config/scenes-features.yaml").read_text())
    name = config["dataset"]["name"]
    train = {
        k: v
        for k, v in config["models"]["lxmert-detector"]["train"].items()
        if k not in ("architecture", "epochs")
    }
    torch.set_num_threads(1)
    questions = run / "resources" / "datasets" / name / "train" / "questions.parquet"
    print("| features | plain s | SwapMix s | ratio | swapped rows |\n|---|---|---|---|---|")
    for source, spec in config["features"].items():
        features = run / "resources" / "features" / name / source / "train.parquet"
        mode = "labels" if spec["kind"] == "perfect_sight" else "donor"
        seconds = {}
        with tempfile.TemporaryDirectory() as tmp:
            for arm, swapmix in (("plain", None), ("swapmix", {"k": config["context"]["k"]})):
                recipe = Recipe.of(
                    "lxmert", epochs=args.epochs, swapmix=swapmix, swap_mode=mode, **train
                )
                stats = train_feature_model(str(questions), str(features), Path(tmp) / arm, recipe)
                seconds[arm] = stats["seconds"]
                swapped = stats["swapped_rows"]
        print(
            f"| {spec['kind']} | {seconds['plain']:.1f} | {seconds['swapmix']:.1f} | "
            f"{seconds['swapmix'] / seconds['plain']:.2f}x | {swapped:,} |"
        )


if __name__ == "__main__":
    main()
