"""LPIPS, the multimodal-robustness paper's second severity-calibration score (its Table
9, beside SSIM): the learned perceptual distance of Zhang et al. (2018) in the field's
formulation, the ``lpips`` package's v0.1 with the AlexNet backbone.

Both images are scaled to [-1, 1] and then per channel by LPIPS's fixed shift (-0.030,
-0.088, -0.188) and scale (0.458, 0.448, 0.450); AlexNet's convolutional layers
(torchvision's ``alexnet().features``, read from its state dict) give the outputs of
their five ReLUs; each is normalized to unit length over its channels (plus 1e-10), the
two images' normalized outputs are subtracted and squared, weighted per channel by the
learned non-negative linear layer of that level (a 1x1 convolution without bias: the
``lpips`` package's ``weights/v0.1/alex.pth``, keys ``lin{0..4}.model.1.weight``),
averaged over the positions, and the five levels summed. 0 for identical images; larger
is more different.

Neither set of weights ships here: the hub and torchvision's downloads are unreachable.
A user gives both files (``lpips.backbone`` and ``lpips.linear``, docs/metrics.md): the
AlexNet weights torchvision downloads (``alexnet-owt-7be5be79.pth``) and the linear
layers, which the
``lpips`` wheel on PyPI carries (this module reads the files and computes the formula;
it does not import the package).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

SHIFT = (-0.030, -0.088, -0.188)
SCALE = (0.458, 0.448, 0.450)
EPS = 1e-10
# torchvision's alexnet().features, by index (so its state dict's keys load as they are).
CONVS = {
    0: (3, 64, 11, 4, 2),
    3: (64, 192, 5, 1, 2),
    6: (192, 384, 3, 1, 1),
    8: (384, 256, 3, 1, 1),
    10: (256, 256, 3, 1, 1),
}
POOLS = (2, 5, 12)
# The five ReLUs whose outputs LPIPS compares, and their channel counts.
TAPS = (1, 4, 7, 9, 11)
CHANNELS = (64, 192, 384, 256, 256)


def alexnet_features() -> nn.Sequential:
    """AlexNet's convolutional part, laid out as torchvision's ``alexnet().features``."""
    layers: list[nn.Module] = []
    for i in range(13):
        if i in CONVS:
            c_in, c_out, k, stride, pad = CONVS[i]
            layers.append(nn.Conv2d(c_in, c_out, k, stride=stride, padding=pad))
        elif i in POOLS:
            layers.append(nn.MaxPool2d(3, 2))
        else:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


@dataclass
class LPIPS:
    """The backbone and the five linear layers (weights of shape (1, C, 1, 1))."""

    features: nn.Sequential
    linear: Sequence[torch.Tensor]

    @torch.no_grad()
    def distance(self, clean: np.ndarray, other: np.ndarray) -> np.ndarray:
        """LPIPS of each pair of (N, H, W, 3) uint8 batches (one size per batch)."""
        a, b = _scaled(clean), _scaled(other)
        total = torch.zeros(a.shape[0], dtype=torch.float64)
        x = torch.cat([a, b])
        level = 0
        for i, layer in enumerate(self.features):
            x = layer(x)
            if i in TAPS:
                fa, fb = _unit(x[: len(a)]), _unit(x[len(a) :])
                weighted = ((fa - fb) ** 2 * self.linear[level]).sum(dim=1)
                total += weighted.mean(dim=(1, 2)).double()
                level += 1
                if level == len(TAPS):
                    break
        return total.numpy()


def _scaled(images: np.ndarray) -> torch.Tensor:
    x = torch.tensor(np.asarray(images), dtype=torch.float32).permute(0, 3, 1, 2)
    x = x / 127.5 - 1.0
    shift = torch.tensor(SHIFT).view(1, 3, 1, 1)
    return (x - shift) / torch.tensor(SCALE).view(1, 3, 1, 1)


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / (torch.sqrt((x**2).sum(dim=1, keepdim=True)) + EPS)


def load_lpips(backbone: str | os.PathLike[str], linear: str | os.PathLike[str]) -> LPIPS:
    """The metric from an AlexNet state dict (torchvision's, whose ``features.*`` are
    used, or the features' own) and the ``lpips`` package's linear-layer file; a file
    that lacks a key or holds the wrong shapes is an error naming it."""
    state = _load(backbone)
    if any(k.startswith("features.") for k in state):  # torchvision's whole AlexNet
        state = {
            k.removeprefix("features."): v for k, v in state.items() if k.startswith("features.")
        }
    features = alexnet_features()
    try:
        features.load_state_dict(state)
    except RuntimeError as exc:
        raise ValueError(f"{backbone}: not AlexNet's convolutional weights ({exc})") from exc
    lin = _load(linear)
    weights = []
    for i, channels in enumerate(CHANNELS):
        key = f"lin{i}.model.1.weight"
        if key not in lin:
            raise ValueError(f"{linear}: no {key}; expected the lpips package's v0.1 alex.pth")
        w = lin[key].float()
        if tuple(w.shape) != (1, channels, 1, 1):
            raise ValueError(
                f"{linear}: {key} has shape {tuple(w.shape)}, not (1, {channels}, 1, 1)"
            )
        weights.append(w.view(1, channels, 1, 1))
    return LPIPS(features.eval(), weights)


def _load(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    if not os.path.isfile(path):
        raise FileNotFoundError(f"LPIPS weights file {path} does not exist")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a state dict")
    return state
