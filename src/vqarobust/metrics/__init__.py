"""Scoring (VQA accuracy, exact match) and robustness metrics (VRE suite)."""

from vqarobust.metrics.robustness import (
    METRIC_NAMES,
    SUBMETRICS,
    RobustnessTables,
    RobustnessWarning,
    robustness_tables,
    softmax_weights,
    weight_sweep,
)
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
    "normalize_answer",
    "robustness_tables",
    "score_predictions",
    "softmax_weights",
    "vqa_accuracy",
    "weight_sweep",
]
