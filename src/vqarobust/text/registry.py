"""The text part of the perturbation registry (:mod:`vqarobust.perturbations`).

A text perturbation is ``(question: str, severity: int, rng: numpy Generator) -> str``.
Tags: ``level`` (``char`` or ``word``), ``needs`` (``wordnet`` for the synonym-based ones).
"""

from __future__ import annotations

from vqarobust.perturbations import PERTURBATIONS
from vqarobust.registry import RegistryView

TEXT_PERTURBATIONS: RegistryView = PERTURBATIONS.view("text perturbation", modality="text")
