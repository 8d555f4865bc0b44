"""Stylize: AdaIN style transfer (Huang and Belongie, 2017) as an image perturbation,
as Stylized-ImageNet made it.

The network is the public AdaIN reference implementation's, rebuilt in plain torch
(no torchvision) from its two weight files: the normalised VGG-19 encoder up to relu4_1
(``vgg_normalised.pth``) and the mirrored decoder (``decoder.pth``), loaded with
``torch.load(weights_only=True)`` and an explicit map from the reference's
``nn.Sequential`` indices to our layers (:data:`ENCODER_CONVS`, :data:`DECODER_CONVS`).
Channel widths are read from the tensors, so a tiny checkpoint in the same layout loads
too (the tests use one).

Severity is the content-style trade-off alpha of the reference's ``style_transfer``:
the decoder sees ``alpha * AdaIN(content, style) + (1 - alpha) * content`` features.
The style image is drawn per (seed, image id, severity) from the configured folder.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import numpy as np

from vqarobust.corruptions.registry import CORRUPTIONS, STYLE_WEIGHTS

log = logging.getLogger(__name__)

# Severity 1..5 -> alpha. Evenly spaced up to 1.0, Stylized-ImageNet's setting (full
# style statistics); alpha 0 would decode the content's own features (severity 0 is the
# untouched image instead).
ALPHAS = (0.2, 0.4, 0.6, 0.8, 1.0)
STYLE_SIZE = 512  # shorter side of a style image, as the reference's --style_size
WEIGHT_FILES = ("vgg_normalised.pth", "decoder.pth")
STYLE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".webp")
# Indices of the convolutions in the reference's nn.Sequential. Encoder: a 1x1 colour
# conv, then 3x3 convs (reflection pad 1, ReLU); a 2x2 ceil-mode max pool follows relu1_2,
# relu2_2 and relu3_4; relu4_1 (conv 29) is the last layer AdaIN uses.
ENCODER_CONVS = (0, 2, 5, 9, 12, 16, 19, 22, 25, 29)
POOL_AFTER = frozenset({5, 12, 25})
# relu4_2 .. relu5_4: stored in vgg_normalised.pth, never evaluated (the reference cuts
# the network at relu4_1 too); their shapes are checked, their values unused.
DEEPER_CONVS = (32, 35, 38, 42, 45, 48, 51)
# Decoder: 3x3 convs (reflection pad 1, ReLU but after the last); nearest 2x upsampling
# after the ReLU of convs 1, 14 and 21.
DECODER_CONVS = (1, 5, 8, 11, 14, 18, 21, 25, 28)
UPSAMPLE_AFTER = frozenset({1, 14, 21})


class AdaINWeightsError(ValueError):
    """The weight files are not in the AdaIN reference layout."""


def _convs(state: dict, indices: tuple[int, ...], source: str) -> list[tuple[Any, Any]]:
    layers = []
    for i in indices:
        missing = [k for k in (f"{i}.weight", f"{i}.bias") if k not in state]
        if missing:
            raise AdaINWeightsError(f"{source} lacks {missing}: not the AdaIN reference layout")
        layers.append((state[f"{i}.weight"].float(), state[f"{i}.bias"].float()))
    return layers


def _load(path: Path) -> dict:
    import torch

    if not path.is_file():
        raise FileNotFoundError(f"AdaIN weights: {path} not found")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise AdaINWeightsError(f"{path}: not a weights-only torch file ({exc})") from None
    if not isinstance(state, dict):
        raise AdaINWeightsError(f"{path}: expected a state dict, got {type(state).__name__}")
    return state


class AdaIN:
    """The AdaIN encoder (to relu4_1) and decoder, as plain tensors on one device."""

    def __init__(self, encoder: list, decoder: list, device: str = "cpu") -> None:
        self.device = device
        self.encoder = [(w.to(device), b.to(device)) for w, b in encoder]
        self.decoder = [(w.to(device), b.to(device)) for w, b in decoder]
        widths = [w.shape[0] for w, _ in self.encoder]
        if self.encoder[0][0].shape[1] != 3 or self.decoder[-1][0].shape[0] != 3:
            raise AdaINWeightsError("the encoder must take and the decoder give 3 channels")
        if self.decoder[0][0].shape[1] != widths[-1]:
            raise AdaINWeightsError(
                f"decoder takes {self.decoder[0][0].shape[1]} channels, encoder gives {widths[-1]}"
            )

    @classmethod
    def from_files(cls, folder: str | os.PathLike[str], device: str = "cpu") -> AdaIN:
        """Load ``vgg_normalised.pth`` and ``decoder.pth`` of the reference from ``folder``.

        Every tensor is accounted for: the encoder's up to relu4_1 and all of the
        decoder's are used; the deeper VGG layers are checked and left unused; any other
        key is an error.
        """
        folder = Path(folder)
        vgg = _load(folder / WEIGHT_FILES[0])
        dec = _load(folder / WEIGHT_FILES[1])
        encoder = _convs(vgg, ENCODER_CONVS, str(folder / WEIGHT_FILES[0]))
        decoder = _convs(dec, DECODER_CONVS, str(folder / WEIGHT_FILES[1]))
        known_vgg = {f"{i}.{p}" for i in ENCODER_CONVS + DEEPER_CONVS for p in ("weight", "bias")}
        known_dec = {f"{i}.{p}" for i in DECODER_CONVS for p in ("weight", "bias")}
        for name, state, known in (
            ("vgg_normalised.pth", vgg, known_vgg),
            ("decoder.pth", dec, known_dec),
        ):
            extra = sorted(set(state) - known)
            if extra:
                raise AdaINWeightsError(f"{name} holds tensors AdaIN does not define: {extra[:5]}")
        return cls(encoder, decoder, device)

    def encode(self, x: Any) -> Any:
        """relu4_1 features of images (N x 3 x H x W, values in 0..1)."""
        import torch.nn.functional as F

        for i, (w, b) in zip(ENCODER_CONVS, self.encoder, strict=True):
            if i == 0:
                x = F.conv2d(x, w, b)
                continue
            x = F.relu(F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), w, b))
            if i in POOL_AFTER:
                x = F.max_pool2d(x, 2, 2, ceil_mode=True)
        return x

    def decode(self, f: Any) -> Any:
        """Images (values about 0..1) from relu4_1 features."""
        import torch.nn.functional as F

        for i, (w, b) in zip(DECODER_CONVS, self.decoder, strict=True):
            f = F.conv2d(F.pad(f, (1, 1, 1, 1), mode="reflect"), w, b)
            if i != DECODER_CONVS[-1]:
                f = F.relu(f)
            if i in UPSAMPLE_AFTER:
                f = F.interpolate(f, scale_factor=2, mode="nearest")
        return f


def adaptive_instance_norm(content: Any, style: Any, eps: float = 1e-5) -> Any:
    """Content features with each channel's mean and std replaced by the style's
    (std from the unbiased variance plus ``eps``, as the reference computes it)."""

    def stats(f: Any) -> tuple[Any, Any]:
        flat = f.flatten(2)
        return flat.mean(2)[..., None, None], (flat.var(2) + eps).sqrt()[..., None, None]

    c_mean, c_std = stats(content)
    s_mean, s_std = stats(style)
    return (content - c_mean) / c_std * s_std + s_mean


def _to_tensor(image: np.ndarray, device: str) -> Any:
    """1 x 3 x H x W floats in 0..1 (a copy: the caller's array stays untouched)."""
    import torch

    pixels = torch.from_numpy(np.array(image, dtype=np.float32)) / 255
    return pixels.permute(2, 0, 1)[None].to(device)


class Stylizer:
    """AdaIN weights and a folder of style images, ready to stylize images.

    Loads the network once; each style image's features are computed on first use and
    kept for the stylizer's lifetime (one corruption job). ``device`` None takes the GPU
    when there is one, else the CPU (and says which).
    """

    def __init__(
        self,
        weights: str | os.PathLike[str],
        styles: str | os.PathLike[str],
        device: str | None = None,
        style_size: int = STYLE_SIZE,
    ) -> None:
        import torch

        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model = AdaIN.from_files(weights, self.device)
        self.styles = style_files(styles)
        self.style_size = style_size
        self._features: dict[int, Any] = {}
        log.info("stylize: AdaIN on %s, %d style images", self.device, len(self.styles))

    def style_features(self, k: int) -> Any:
        """relu4_1 features of style image ``k`` (shorter side resized to style_size)."""
        from PIL import Image

        if k not in self._features:
            with Image.open(self.styles[k]) as im:
                im = im.convert("RGB")
                scale = self.style_size / min(im.size)
                size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
                style = np.asarray(im.resize(size, Image.Resampling.BILINEAR))
            import torch

            with torch.inference_mode():
                self._features[k] = self.model.encode(_to_tensor(style, self.device))
        return self._features[k]

    def __call__(self, image: np.ndarray, severity: int, rng: np.random.Generator) -> np.ndarray:
        """Stylize an HxWx3 uint8 image at ``severity`` with a style drawn from ``rng``."""
        return self.transfer(image, int(rng.integers(len(self.styles))), ALPHAS[severity - 1])

    def transfer(self, image: np.ndarray, style: int, alpha: float) -> np.ndarray:
        """``image`` decoded from ``alpha * AdaIN(content, style) + (1 - alpha) * content``
        features, cropped back to its size (the decoder gives multiples of 8)."""
        import torch

        h, w = image.shape[:2]
        with torch.inference_mode():
            content = self.model.encode(_to_tensor(image, self.device))
            t = adaptive_instance_norm(content, self.style_features(style))
            out = self.model.decode(alpha * t + (1 - alpha) * content)[0, :, :h, :w]
        out = (out.clamp(0, 1) * 255).round().byte().permute(1, 2, 0).cpu().numpy()
        return np.ascontiguousarray(out)


def style_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The image files of a styles folder, sorted by name; none is an error."""
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"styles folder {folder} does not exist")
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in STYLE_SUFFIXES)
    if not files:
        raise FileNotFoundError(
            f"styles folder {folder} holds no images ({', '.join(STYLE_SUFFIXES)})"
        )
    return files


# Its own class in the VRE tables and the figures.
FAMILY = "stylize"


@CORRUPTIONS.register(family=FAMILY, benchmark=False, severities=5, needs=STYLE_WEIGHTS)
def stylize(
    image: np.ndarray, severity: int, rng: np.random.Generator, stylizer: Stylizer | None = None
) -> np.ndarray:
    """AdaIN style transfer with alpha ``ALPHAS[severity - 1]`` (needs ``stylizer``)."""
    if stylizer is None:
        raise ValueError(f"stylize needs {STYLE_WEIGHTS}; pass stylizer=Stylizer(weights, styles)")
    return stylizer(image, severity, rng)
