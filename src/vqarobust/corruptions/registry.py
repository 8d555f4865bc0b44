"""The corruption registry. A corruption is ``(image uint8 HxWx3, severity, rng) -> uint8 HxWx3``.

It is the image part of the one perturbation registry (:mod:`vqarobust.perturbations`).
Tags: ``family`` (noise, blur, weather, attribute, physical, digital, colour, geometric,
resolution, occlusion, ...), ``benchmark`` (one of the benchmark's 14, docs/corruptions.md),
``severities`` (5, or 1 for single-severity transforms), ``options`` (config settings it
takes), ``needs`` (what it takes beyond the image: :data:`STYLE_WEIGHTS`, or ``boxes``
of :mod:`~vqarobust.corruptions.boxes`), for a box-aware one ``shortfall`` (why an image
gets less than its severity), ``outside_vre`` (kept out of VRE and the aggregates built
with it unless ``vre.include_grayscale``) and ``diagnostic`` (:data:`COLOUR_BIAS`: the
colour-bias tables read its answers). The workflow queries these tags, never a name, so
a plugin corruption with a tag is treated as the built-in one that has it.
"""

from __future__ import annotations

from vqarobust.perturbations import PERTURBATIONS
from vqarobust.registry import RegistryView

# The ``needs`` of a corruption that takes ``stylizer=``, an AdaIN Stylizer built from
# the config's ``stylize`` block (weights and style images). The text is what the
# listings and the errors show.
STYLE_WEIGHTS = (
    "AdaIN weights (stylize.weights: a folder with vgg_normalised.pth and decoder.pth of the "
    "AdaIN reference implementation) and style images (stylize.styles: a folder, e.g. "
    "paintings from Kaggle's Painter by Numbers); docs/corruptions.md"
)
# The ``diagnostic`` of a decolourizing corruption whose answers the colour-bias tables
# read (vqarobust.metrics.colour_bias).
COLOUR_BIAS = "colour_bias"

CORRUPTIONS: RegistryView = PERTURBATIONS.view("corruption", modality="image")
