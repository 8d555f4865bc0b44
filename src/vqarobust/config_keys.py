"""User-facing config keys that share a perturbation's name, named once.

The code finds perturbations by their registry tags, never by name; a config block
keeps the name users know, and its readers index it through these constants.
"""

from __future__ import annotations

# The block of AdaIN weights, style images and style size that every corruption whose
# ``needs`` is ``STYLE_WEIGHTS`` (vqarobust.corruptions.registry) is built from.
STYLIZE = "stylize"
