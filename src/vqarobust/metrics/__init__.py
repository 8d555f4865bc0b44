"""Scoring (VQA accuracy, exact match) and robustness metrics (VRE suite).

The scoring functions are imported here. The other names load on first use (module
``__getattr__``), so importing one metric module does not import them all: an
analysis's code digest (docs/architecture.md) then reaches only the metric modules it
imports, and editing MMI reruns the analyses that compute MMI, not every analysis. Code
inside the package imports from the modules themselves (tests/test_digests.py checks).
``vqa_accuracy`` names a module and its function: imported here, the name is the
function.
"""

from __future__ import annotations

import importlib
from typing import Any

from vqarobust.metrics.vqa_accuracy import (
    NORMALIZATIONS,
    exact_match,
    normalize_answer,
    process_punctuation,
    score_predictions,
    vqa_accuracy,
    vqa_accuracy_both,
)

# name -> the module of this package that defines it, imported when the name is used.
LAZY = {
    "METRIC_NAMES": "robustness",
    "SUBMETRICS": "robustness",
    "RobustnessTables": "robustness",
    "RobustnessWarning": "robustness",
    "robustness_tables": "robustness",
    "softmax_weights": "robustness",
    "weight_sweep": "robustness",
    "mmi_table": "mmi",
    "r_score": "rscore",
    "rscore_tables": "rscore",
}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        return getattr(importlib.import_module(f"{__name__}.{LAZY[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "METRIC_NAMES",
    "NORMALIZATIONS",
    "SUBMETRICS",
    "RobustnessTables",
    "RobustnessWarning",
    "exact_match",
    "mmi_table",
    "normalize_answer",
    "process_punctuation",
    "r_score",
    "robustness_tables",
    "rscore_tables",
    "score_predictions",
    "softmax_weights",
    "vqa_accuracy",
    "vqa_accuracy_both",
    "weight_sweep",
]
