"""Detector-like features for scenes: each object's crop encoded by a small trained CNN.

The stand-in for the Faster R-CNN features the SwapMix paper's models read: a CNN is
trained (on the CPU, by the workflow) to tell an object's class, colour and size from a
fixed window around it, and the vector before its three heads is the object's feature
row. The window has a fixed size (not resized to the box), so the size stays visible.
Boxes come from the scene graph (docs/context.md).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import torch
from torch import nn

from vqarobust import store
from vqarobust.features import scenes as scene_features
from vqarobust.features.table import feature_table, write_features

log = logging.getLogger(__name__)

WINDOW = 40  # pixels around the object's centre (the largest object is 30 wide)
WEIGHTS, CONFIG = "detector.safetensors", "detector.json"


def crops(image: np.ndarray, boxes: Sequence[Sequence[float]]) -> np.ndarray:
    """(n, 3, WINDOW, WINDOW) float32 crops in [0, 1] centred on each (normalized) box;
    the image is edge-padded so that windows near a border keep their size."""
    h, w = image.shape[:2]
    half = WINDOW // 2
    padded = np.pad(image, ((half, half), (half, half), (0, 0)), mode="edge")
    out = np.empty((len(boxes), 3, WINDOW, WINDOW), np.float32)
    for i, (x0, y0, x1, y1) in enumerate(boxes):
        cx, cy = int(round((x0 + x1) / 2 * w)), int(round((y0 + y1) / 2 * h))
        patch = padded[cy : cy + WINDOW, cx : cx + WINDOW]
        out[i] = patch.transpose(2, 0, 1) / 255.0
    return out


class ObjectEncoder(nn.Module):
    """Three conv blocks, a feature layer and one head per label (class, colour, size)."""

    def __init__(
        self,
        dim: int,
        n_classes: int,
        n_colours: int,
        n_sizes: int,
        channels: Sequence[int] = (16, 32, 64),
    ) -> None:
        super().__init__()
        layers, c_in = [], 3
        for c in channels:
            layers += [
                nn.Conv2d(c_in, c, 3, padding=1),
                nn.BatchNorm2d(c),
                nn.ReLU(),
                nn.MaxPool2d(2),
            ]
            c_in = c
        self.conv = nn.Sequential(*layers)
        side = WINDOW // 2 ** len(channels)
        self.feature = nn.Sequential(nn.Flatten(), nn.Linear(c_in * side * side, dim), nn.ReLU())
        self.heads = nn.ModuleList(nn.Linear(dim, n) for n in (n_classes, n_colours, n_sizes))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, list[torch.Tensor]]:
        f = self.feature(self.conv(x))
        return f, [head(f) for head in self.heads]


def _labels() -> dict[str, list[str]]:
    from vqarobust.datasets import scenes

    return {
        "class": list(scenes.SHAPES),
        "colour": list(scenes.COLOURS),
        "size": list(scenes.SIZES),
    }


def _object_crops(
    images_dir: str, scene_seed: int, split: str, rendered: Sequence[int] = ()
) -> tuple[list[dict], np.ndarray]:
    """Rows and crops of every object of the folder's images, and of the ``rendered``
    scenes the folder lacks (donors: drawn from their scene graphs, as PNG, the way the
    scenes adapter serves them)."""
    from vqarobust.datasets import scenes

    shards = store.ImageShards(images_dir)
    stored = set(shards.ids())
    rows = scene_features.object_rows(scene_seed, split, stored | set(rendered))
    by_image: dict[int, list[int]] = {}
    for i, r in enumerate(rows):
        by_image.setdefault(r["image_id"], []).append(i)
    out = np.empty((len(rows), 3, WINDOW, WINDOW), np.float32)
    ids = sorted(i for i in by_image if i in stored)
    for start in range(0, len(ids), 256):  # a few hundred images decoded at a time
        chunk = ids[start : start + 256]
        for image_id, data in shards.read(chunk).items():
            idx = by_image[image_id]
            out[idx] = crops(store.decode_image(data), [rows[i]["box"] for i in idx])
    for image_id in sorted(set(by_image) - stored):
        data = scenes.png(scenes.render(scenes.scene(scene_seed, split, image_id)))
        idx = by_image[image_id]
        out[idx] = crops(store.decode_image(data), [rows[i]["box"] for i in idx])
    return rows, out


@dataclass(frozen=True)
class DetectorRecipe:
    """How the object encoder is trained: embedding ``dim``, ``epochs`` over the
    objects, ``batch_size``, AdamW's ``learning_rate`` and the ``seed`` of the weights
    and of the batches (a feature source's keys, docs/configuration.md)."""

    dim: int = 64
    epochs: float = 3.0
    batch_size: int = 128
    learning_rate: float = 2e-3
    seed: int = 0

    @classmethod
    def take(cls, settings: dict[str, Any]) -> DetectorRecipe:
        """The recipe's keys popped from ``settings`` (a job's params)."""
        return cls(**{f.name: settings.pop(f.name) for f in fields(cls) if f.name in settings})


DEFAULT_RECIPE = DetectorRecipe()


def train_detector(
    images_dir: str,
    out_dir: str | os.PathLike[str],
    recipe: DetectorRecipe = DEFAULT_RECIPE,
    scene_seed: int = 0,
    split: str = "train",
    threads: int = 1,
) -> dict[str, float]:
    """Train the object encoder on every object of a scenes split's prepared images as
    ``recipe`` says; save its weights (safetensors) and settings to ``out_dir``. Returns
    statistics, including the accuracy of each head on the last tenth of the steps."""
    from safetensors.torch import save_file

    dim, epochs, batch_size = recipe.dim, recipe.epochs, recipe.batch_size
    learning_rate, seed = recipe.learning_rate, recipe.seed

    torch.manual_seed(seed)
    torch.set_num_threads(max(1, threads))
    labels = _labels()
    rows, x = _object_crops(images_dir, scene_seed, split)
    targets = torch.tensor(
        [
            [
                labels["class"].index(r["class"]),
                labels["colour"].index(r["attributes"][0]),
                labels["size"].index(r["attributes"][1]),
            ]
            for r in rows
        ]
    )
    x = torch.from_numpy(x)
    model = ObjectEncoder(dim, *(len(v) for v in labels.values()))
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    steps = max(1, int(round(epochs * len(rows) / batch_size)))
    gen = torch.Generator().manual_seed(seed)
    correct, seen, t0 = torch.zeros(3), 0, time.perf_counter()
    model.train()
    for step in range(steps):
        idx = torch.randint(len(rows), (batch_size,), generator=gen)
        _, logits = model(x[idx])
        loss = sum(nn.functional.cross_entropy(lg, targets[idx, j]) for j, lg in enumerate(logits))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step >= steps * 0.9:
            correct += torch.stack(
                [(lg.argmax(-1) == targets[idx, j]).sum() for j, lg in enumerate(logits)]
            ).float()
            seen += len(idx)
        if (step + 1) % max(1, steps // 10) == 0:
            log.info("detector step %d/%d loss %.4f", step + 1, steps, loss.item())
    accuracy = (correct / max(seen, 1)).tolist()
    stats = {
        "objects": len(rows),
        "steps": steps,
        "seconds": time.perf_counter() - t0,
        "class_accuracy": accuracy[0],
        "colour_accuracy": accuracy[1],
        "size_accuracy": accuracy[2],
    }
    model.eval()
    with store.atomic_path(out_dir) as tmp:
        tmp.mkdir(parents=True, exist_ok=True)
        save_file(model.state_dict(), str(tmp / WEIGHTS))
        (tmp / CONFIG).write_text(
            json.dumps({"dim": dim, "labels": labels, "window": WINDOW, "stats": stats}, indent=1)
        )
    log.info("trained the object encoder: %s", stats)
    return stats


def load_detector(path: str | os.PathLike[str]) -> ObjectEncoder:
    """The trained object encoder (weights only: safetensors, no pickled code)."""
    from safetensors.torch import load_file

    with open(os.path.join(path, CONFIG), encoding="utf-8") as fh:
        settings = json.load(fh)
    model = ObjectEncoder(settings["dim"], *(len(v) for v in settings["labels"].values()))
    model.load_state_dict(load_file(os.path.join(path, WEIGHTS)))
    return model.eval()


@torch.inference_mode()
def extract_detector_features(
    images_dir: str,
    detector_dir: str,
    out_path: str | os.PathLike[str],
    scene_seed: int = 0,
    split: str = "test",
    threads: int = 1,
    rendered: Sequence[int] = (),
) -> int:
    """Encode every object of a folder of scenes images (clean or corrupted: the crops
    come from the pixels given), and of the ``rendered`` scenes of the split the folder
    lacks (a clean split's donors), into a feature table. Returns the number of objects."""
    torch.set_num_threads(max(1, threads))
    model = load_detector(detector_dir)
    rows, x = _object_crops(images_dir, scene_seed, split, rendered)
    chunks = [model(torch.from_numpy(x[s : s + 1024]))[0] for s in range(0, len(x), 1024)]
    features = torch.cat(chunks) if chunks else torch.zeros(0)
    table = feature_table({**r, "feature": features[i].tolist()} for i, r in enumerate(rows))
    images = len({r["image_id"] for r in rows})
    write_features(table, out_path, {"kind": "detector", "images": images})
    log.info("encoded %d objects of %d images (%s and any rendered)", len(rows), images, images_dir)
    return len(rows)
