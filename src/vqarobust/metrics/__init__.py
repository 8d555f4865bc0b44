"""Scoring (VQA accuracy, exact match) and robustness metrics (VRE suite)."""

from vqarobust.metrics.mmi import mmi_table
from vqarobust.metrics.robustness import (
    METRIC_NAMES,
    SUBMETRICS,
    RobustnessTables,
    RobustnessWarning,
    robustness_tables,
    softmax_weights,
    weight_sweep,
)
from vqarobust.metrics.rscore import r_score, rscore_table
from vqarobust.metrics.vqa_accuracy import (
    exact_match,
    normalize_answer,
    score_predictions,
    vqa_accuracy,
)

__all__ = [
    "METRIC_NAMES",
    "SUBMETRICS",
    "RobustnessTables",
    "RobustnessWarning",
    "exact_match",
    "mmi_table",
    "normalize_answer",
    "r_score",
    "robustness_tables",
    "rscore_table",
    "score_predictions",
    "softmax_weights",
    "vqa_accuracy",
    "weight_sweep",
]
