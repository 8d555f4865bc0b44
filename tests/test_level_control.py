"""The ranker comparison (level control) by hand, and the report's sentence on it."""

import polars as pl
import pytest

from vqarobust.metrics.level_control import level_control, ranker_comparison
from vqarobust.report.sections.questions import ranker_sentence


def _acc(perturbation, model, values):
    levels = list(range(1, len(values) + 1))
    return pl.DataFrame(
        {"model": model, "perturbation": perturbation, "severity": levels, "accuracy": values}
    )


def test_level_control_by_hand():
    acc = pl.concat(
        [
            _acc("bq_a", "m1", [0.9, 0.8, 0.7, 0.6]),  # falls every level: rho -1
            _acc("bq_a", "m2", [0.9, 0.7, 0.8, 0.6]),  # rho -0.8, one of three steps rises
            _acc("bq_b", "m1", [0.6, 0.7, 0.8, 0.9]),  # rises: rho +1
            _acc("bq_b", "m2", [0.5, 0.5, 0.5, 0.5]),  # flat: no correlation
        ]
    )
    per = level_control(acc).sort("perturbation", "model")
    assert per["spearman"].to_list()[:3] == pytest.approx([-1.0, -0.8, 1.0])
    assert per["spearman"][3] != per["spearman"][3]  # NaN: flat accuracy
    assert per["non_rising"].to_list() == pytest.approx([1.0, 2 / 3, 0.0, 1.0])
    assert per["first_to_last"].to_list() == pytest.approx([0.3, 0.3, -0.3, 0.0])
    table = ranker_comparison(per)
    assert table["perturbation"].to_list() == ["bq_a", "bq_b"]
    a = table.row(0, named=True)
    assert a["spearman"] == pytest.approx(-0.9) and a["non_rising"] == pytest.approx(5 / 6)
    # bq_b's mean leaves the flat model out: +1.
    assert table["spearman"][1] == pytest.approx(1.0)
    sentence = ranker_sentence(table)
    assert sentence == (
        "The most level-controllable noise here comes from bq_a: accuracy's rank correlation "
        "with the level is -0.900 (mean over 2 models), 83.3% of the steps from one level to "
        "the next do not raise accuracy, and accuracy falls by 0.300 from the first level to "
        "the last."
    )
    flat = ranker_comparison(level_control(_acc("bq_c", "m", [0.5, 0.5])))
    assert ranker_sentence(flat) is None
