"""A model family: a thin adapter over a tiny torch model, a linear layer over the
image's mean colour and a hashed bag of the question's words.

A checkpoint is a folder (``path_or_id``) with ``config.json`` (``answers``, the answer
of each output; ``buckets``, the bag's size; optional ``load_delay_s``, seconds loading
waits, standing in for a large model's load in scheduling tests) and
``model.safetensors`` (the layer's ``weight`` and ``bias``). Batching, halving on
out-of-memory, GPU tags, fingerprints and provenance are the workflow's, as for any
family.
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from vqarobust.models import FAMILIES
from vqarobust.models.base import VQAModel, torch_dtype

# Entry keys that only resolve Hub weights; a local folder has none to apply.
HUB_KEYS = ("revision", "allow_download", "trust_remote_code")


def features(images: Sequence[Image.Image], questions: Sequence[str], buckets: int) -> np.ndarray:
    """Per request: the image's mean R, G, B in [0, 1], then word counts hashed (CRC-32)
    into ``buckets``."""
    out = np.zeros((len(images), 3 + buckets), np.float32)
    for i, (image, question) in enumerate(zip(images, questions, strict=True)):
        out[i, :3] = np.asarray(image.convert("RGB"), np.float32).mean(axis=(0, 1)) / 255
        for word in question.lower().split():
            out[i, 3 + zlib.crc32(word.strip("?,.!").encode()) % buckets] += 1
    return out


class ColourBagVQA(VQAModel):
    """The example family's adapter."""

    def __init__(
        self,
        path_or_id: str,
        name: str = "model",
        device: str = "cpu",
        batch_size: int = 64,
        dtype: str = "auto",
        **hub: Any,
    ) -> None:
        import torch
        from safetensors.torch import load_file

        super().__init__(batch_size)
        unknown = set(hub) - set(HUB_KEYS)
        if unknown:
            raise TypeError(f"{name}: family example-colour-bag takes no {sorted(unknown)}")
        folder = Path(path_or_id)
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.answers, self.buckets = list(config["answers"]), int(config["buckets"])
        # A slow load on purpose (tests/test_gpu_concurrency.py): jobs that hold their GPU
        # lease for seconds, so that a test sees which of them overlap.
        time.sleep(float(config.get("load_delay_s", 0)))
        self.net = torch.nn.Linear(3 + self.buckets, len(self.answers))
        self.net.load_state_dict(load_file(folder / "model.safetensors"))
        # The config's dtype as every family reads it (auto: bfloat16 on a GPU, float32 on
        # the CPU); the workflow checks this attribute against its fingerprint.
        self.dtype = torch_dtype(dtype, device)
        self.net.to(device=device, dtype=self.dtype).eval()
        self.device = device

    def answer(self, images: Sequence[Image.Image], questions: Sequence[str]) -> list[str]:
        """The highest-scoring answer of each request."""
        import torch

        x = torch.from_numpy(features(images, questions, self.buckets))
        x = x.to(device=self.device, dtype=self.dtype)
        with torch.no_grad():
            best = self.net(x).argmax(dim=1).tolist()
        return [self.answers[i] for i in best]


@FAMILIES.register("example-colour-bag")
def colour_bag(**kwargs: Any) -> VQAModel:
    """The example family: a linear layer over mean colour and a bag of words."""
    return ColourBagVQA(**kwargs)
