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
from vqarobust.metrics.rscore import r_score, rscore_tables
from vqarobust.metrics.vqa_accuracy import (
    NORMALIZATIONS,
    exact_match,
    normalize_answer,
    process_punctuation,
    score_predictions,
    vqa_accuracy,
    vqa_accuracy_both,
)

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
