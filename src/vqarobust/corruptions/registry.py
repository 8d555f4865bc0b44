"""The corruption registry. A corruption is ``(image uint8 HxWx3, severity, rng) -> uint8 HxWx3``.

It is the image part of the one perturbation registry (:mod:`vqarobust.perturbations`).
Tags: ``family`` (noise, blur, weather, attribute, physical, digital, colour, geometric,
resolution, occlusion, ...), ``benchmark`` (one of the benchmark's 14, docs/corruptions.md),
``severities`` (5, or 1 for single-severity transforms), ``options`` (config settings it
takes), ``needs`` (what it takes beyond the image: ``stylizer`` weights, or ``boxes``)
and, for a box-aware one, ``shortfall`` (why an image gets less than its severity).
"""

from __future__ import annotations

from vqarobust.perturbations import PERTURBATIONS
from vqarobust.registry import RegistryView

CORRUPTIONS: RegistryView = PERTURBATIONS.view("corruption", modality="image")
