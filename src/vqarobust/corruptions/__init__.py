"""Image corruptions: a registry of ``(image, severity, rng) -> image`` functions.

One module per class: ``noise``, ``blur``, ``weather``, ``attribute``, ``physical``,
``digital``, ``colour``, ``geometric``, ``resolution``, ``occlusion``, ``controls``
(``blank``, not a perturbation), ``stylize`` (AdaIN, which needs weights and style
images passed in as ``stylizer=``); shared image
operations in ``filters``; the reference package, seeded alike, in ``reference`` (tests
and benchmarks only).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from vqarobust.corruptions import (  # noqa: F401  (importing registers the corruptions)
    attribute,
    blur,
    colour,
    controls,
    digital,
    geometric,
    noise,
    occlusion,
    physical,
    resolution,
    stylize,
    weather,
)
from vqarobust.corruptions.registry import COLOUR_BIAS, CORRUPTIONS, STYLE_WEIGHTS
from vqarobust.seeding import derive_seed

MIN_SIZE = 32


def names(family: str | None = None, benchmark: bool | None = None) -> list[str]:
    """Registered corruption names, optionally filtered by family or benchmark membership."""
    tags: dict[str, object] = {}
    if family is not None:
        tags["family"] = family
    if benchmark is not None:
        tags["benchmark"] = benchmark
    return CORRUPTIONS.list(**tags)


def family(name: str) -> str:
    """The class of a corruption (noise, blur, weather, ...)."""
    return CORRUPTIONS.entry(name).tags["family"]


def max_severity(name: str) -> int:
    """The highest severity a corruption defines (5, or 1 for colour transforms)."""
    return int(CORRUPTIONS.entry(name).tags.get("severities", 5))


def options(name: str) -> tuple[str, ...]:
    """The settings a corruption takes from the config besides the image (keyword
    arguments; ``border`` for the geometric ones that uncover a border)."""
    return tuple(CORRUPTIONS.entry(name).tags.get("options", ()))


def resizes(name: str) -> bool:
    """Whether a corruption returns a smaller image than it is given (``low_resolution``:
    a model's processor does the rest); every other keeps the size."""
    return bool(CORRUPTIONS.entry(name).tags.get("resizes", False))


def needs(name: str) -> str | None:
    """What a corruption needs beyond the image (None for the self-contained ones)."""
    return CORRUPTIONS.entry(name).tags.get("needs")


def needs_style_weights(name: str) -> bool:
    """Whether a corruption takes ``stylizer=``, built from the config's ``stylize``
    block (its ``needs`` is :data:`STYLE_WEIGHTS`); False for an unknown name."""
    return name in CORRUPTIONS and needs(name) == STYLE_WEIGHTS


def outside_vre(name: str) -> bool:
    """Whether a corruption is kept out of VRE and the aggregates built with it unless
    ``vre.include_grayscale`` (its ``outside_vre`` tag); False for an unknown name."""
    return name in CORRUPTIONS and bool(CORRUPTIONS.entry(name).tags.get("outside_vre"))


def removes_image(name: str) -> bool:
    """Whether a control takes the image away entirely (its ``removes_image`` tag: the
    blank control), so that its accuracy is the model's without the image; False for an
    unknown name."""
    return name in CORRUPTIONS and bool(CORRUPTIONS.entry(name).tags.get("removes_image"))


def image_removing_controls() -> list[str]:
    """The registered controls that take the image away, by name."""
    return [n for n in CORRUPTIONS.list() if removes_image(n)]


def diagnostic(name: str) -> str | None:
    """The diagnostic that reads a corruption's answers (:data:`COLOUR_BIAS`), or None;
    None for an unknown name."""
    return CORRUPTIONS.entry(name).tags.get("diagnostic") if name in CORRUPTIONS else None


def box_shortfall(
    name: str, height: int, width: int, severity: int, boxes: np.ndarray | None
) -> str | None:
    """Why a box-aware corruption (``needs`` ``"boxes"``) does less than its severity
    says on an image with these relevant ``boxes``, or None where it does all of it: no
    box data, no relevant object (or none inside the image), or its own reason (a
    widened crop window, no room for a patch). The materializing job counts and logs
    these."""
    from vqarobust.corruptions.boxes import pixel_bounds

    if boxes is None:
        return "no box data"
    if not len(boxes):
        return "no relevant object"
    boxes = pixel_bounds(boxes, height, width)
    if not len(boxes):
        return "no relevant object inside the image"
    check = CORRUPTIONS.entry(name).tags.get("shortfall")
    return check(height, width, severity, boxes) if check else None


def to_rgb(image: np.ndarray) -> np.ndarray:
    """An HxWx3 uint8 view of a grayscale (HxW, HxWx1) or RGB(A) uint8 image."""
    if not isinstance(image, np.ndarray):
        raise TypeError(f"image must be a numpy array, got {type(image).__name__}")
    if image.dtype != np.uint8:
        raise TypeError(f"image must be uint8, got {image.dtype}")
    if image.ndim == 2:
        image = image[..., None]
    if image.ndim != 3 or image.shape[2] not in (1, 3, 4):
        raise ValueError(f"image must be HxW, HxWx1, HxWx3 or HxWx4, got shape {image.shape}")
    if image.shape[2] == 1:
        image = np.repeat(image, 3, axis=2)
    elif image.shape[2] == 4:
        # Alpha is dropped, not composited: corruptions act on the colour content.
        image = image[..., :3]
    return np.ascontiguousarray(image)


def corrupt(
    image: np.ndarray, name: str, severity: int, seed: int = 0, **context: Any
) -> np.ndarray:
    """Apply corruption ``name`` at ``severity`` (0 = unchanged) with a seeded generator.

    ``context`` goes to corruptions that need more than the image (``stylize`` takes
    ``stylizer=``, ``object_crop`` and ``occlude_context`` take ``boxes=``). Returns an HxWx3
    uint8 array of the input's height and width, or of at most them for a corruption that
    :func:`resizes`.
    """
    image = to_rgb(image)
    h, w = image.shape[:2]
    if min(h, w) < MIN_SIZE:
        raise ValueError(f"image is {w}x{h}; corruptions need at least {MIN_SIZE}x{MIN_SIZE}")
    fn = CORRUPTIONS.get(name)
    top = max_severity(name)
    if not isinstance(severity, (int, np.integer)) or not 0 <= severity <= top:
        raise ValueError(f"severity of {name!r} must be an integer in 0..{top}, got {severity!r}")
    if severity == 0:
        return image.copy()
    out = fn(image, int(severity), np.random.default_rng(seed), **context)
    if resizes(name):
        oh, ow = out.shape[:2]
        fits = out.ndim == 3 and out.shape[2] == 3 and 0 < oh <= h and 0 < ow <= w
        expected = f"uint8 HxWx3 of at most {image.shape}"
    else:
        fits, expected = out.shape == image.shape, f"uint8 {image.shape}"
    if out.dtype != np.uint8 or not fits:
        raise RuntimeError(
            f"{name} severity {severity} returned {out.dtype} {out.shape}, not {expected}"
        )
    return out


def check_contract(name: str, seed: int = 0) -> None:
    """Run ``name`` on a sample image (:func:`~vqarobust.corruptions.samples.photo_like`,
    48x64) at each of its severities, twice with one seed, and raise ``ValueError``
    with the reason where it breaks the contract every corruption keeps: uint8 HxWx3 of
    the input's size (of at most it, for one that :func:`resizes`), the input left as it
    was, and the same pixels for the same seed (every draw from the ``rng`` it is
    given). The workflow runs it on each plugin corruption a config names before any
    job (a box-aware one without boxes)."""
    from vqarobust.corruptions.boxes import NEEDS as BOXES
    from vqarobust.corruptions.samples import photo_like

    image = photo_like(48, 64, seed)
    context = {"boxes": None} if needs(name) == BOXES else {}
    for severity in range(1, max_severity(name) + 1):
        before = image.copy()
        try:
            first = corrupt(image, name, severity, seed, **context)
            second = corrupt(image, name, severity, seed, **context)
        except Exception as exc:
            raise ValueError(
                f"severity {severity} on a 48x64 sample image: {type(exc).__name__}: {exc}"
            ) from None
        if not np.array_equal(image, before):
            raise ValueError(f"severity {severity} changed its input image in place")
        if not np.array_equal(first, second):
            raise ValueError(
                f"severity {severity} gave other pixels for the same seed: it "
                "must draw only from the rng it is given"
            )


def corrupt_item(
    image: np.ndarray,
    name: str,
    severity: int,
    global_seed: int,
    image_id: object,
    **context: Any,
) -> np.ndarray:
    """Corrupt one dataset image with the seed of (global seed, image id, name, severity)."""
    seed = derive_seed(global_seed, image_id, name, severity)
    return corrupt(image, name, severity, seed, **context)


__all__ = [
    "COLOUR_BIAS",
    "CORRUPTIONS",
    "STYLE_WEIGHTS",
    "box_shortfall",
    "check_contract",
    "corrupt",
    "corrupt_item",
    "diagnostic",
    "family",
    "max_severity",
    "names",
    "needs",
    "needs_style_weights",
    "outside_vre",
    "resizes",
]
