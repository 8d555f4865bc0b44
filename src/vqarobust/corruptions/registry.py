"""The corruption registry. A corruption is ``(image uint8 HxWx3, severity, rng) -> uint8 HxWx3``.

Tags: ``family`` (noise, blur, weather, attribute, physical, digital, colour),
``benchmark`` (one of the benchmark's 14, docs/corruptions.md), ``severities`` (5, or 1
for single-severity transforms).
"""

from __future__ import annotations

from vqarobust.registry import Registry

CORRUPTIONS: Registry = Registry("corruption")
