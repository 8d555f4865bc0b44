"""The SwapMix paper's tables: what each model reads, the Table 1 and Table 2 layouts,
and the findings' sentences, recomputed by hand."""

from __future__ import annotations

import re

import polars as pl

from vqarobust.metrics.context_paper import (
    context_findings,
    finding_sentence,
    model_inputs,
    paper_table1,
    paper_table2,
)

MODELS = {
    "det": {"family": "lxmert", "features": "d", "train": {"architecture": "lxmert"}},
    "det-sm": {
        "family": "lxmert",
        "features": "d",
        "train": {"architecture": "lxmert", "swapmix": {"k": 3}},
    },
    "sight": {"family": "lxmert", "features": "s", "train": {"architecture": "lxmert"}},
    "vilt": {"family": "vqa-classifier", "path_or_id": "x"},
}
FEATURES = {"d": {"kind": "detector"}, "s": {"kind": "perfect_sight"}}


def test_model_inputs_and_the_two_layouts():
    inputs = model_inputs(MODELS, FEATURES)
    assert inputs.rows() == [
        ("det", "d", "detector", "plain"),
        ("det-sm", "d", "detector", "swapmix"),
        ("sight", "s", "perfect_sight", "plain"),
        ("vilt", "pixels", "pixels", "checkpoint"),
    ]
    reliance = pl.DataFrame(
        {
            "model": ["det", "det", "sight"],
            "perturbation": ["all", "swap_class", "all"],
            "reliance": [0.3, 0.2, 0.1],
            "low": [0.2, 0.1, 0.05],
            "high": [0.4, 0.3, 0.15],
        }
    )
    effective = pl.DataFrame(
        {
            "model": ["det", "sight"],
            "perturbation": ["all", "all"],
            "accuracy": [0.8, 0.9],
            "effective_accuracy": [0.6, 0.85],
            "low": [0.5, 0.8],
            "high": [0.7, 0.9],
        }
    )
    t1 = paper_table1(inputs, reliance, effective)
    assert t1.columns == [
        "model",
        "kind",
        "training",
        "accuracy",
        "context_reliance",
        "context_reliance_low",
        "context_reliance_high",
        "effective_accuracy",
        "effective_accuracy_low",
        "effective_accuracy_high",
    ]
    assert t1.select("model", "accuracy", "context_reliance", "effective_accuracy").rows() == [
        ("det", 0.8, 0.3, 0.6),
        ("sight", 0.9, 0.1, 0.85),
    ]
    reliance_k = pl.DataFrame(
        {
            "model": ["det"] * 4,
            "perturbation": ["swap_class", "swap_attribute"] * 2,
            "n_correct": [10] * 4,
            "n_changed": [1, 2, 3, 4],
            "reliance": [0.1, 0.2, 0.3, 0.4],
            "k": [5, 5, 10, 10],
        }
    )
    t2 = paper_table2(inputs, reliance_k)
    assert t2.columns == [
        "model",
        "kind",
        "training",
        "class k=5",
        "attribute k=5",
        "class k=10",
        "attribute k=10",
    ]
    assert t2.rows() == [("det", "detector", "plain", 0.1, 0.2, 0.3, 0.4)]


def test_findings_pair_the_right_models_and_say_what_their_numbers_say():
    inputs = model_inputs(MODELS, FEATURES)
    reliance = pl.DataFrame(
        {
            "model": ["det", "det-sm", "sight", "vilt"],
            "perturbation": ["all"] * 4,
            "reliance": [0.3, 0.2, 0.1, 0.5],
        }
    )
    comparisons = pl.DataFrame(
        {
            "modality": ["context"] * 2,
            "metric": ["context_reliance"] * 2,
            "model_a": ["det", "det"],
            "model_b": ["det-sm", "sight"],
            "difference": [0.1, 0.2],
            "low": [-0.02, 0.1],
            "high": [0.2, 0.3],
            "se": [0.05, 0.05],
            "p_value": [0.1, 0.002],
            "p_adjusted": [0.1, 0.004],
            "adjust": ["holm"] * 2,
            "family_size": [2, 2],
            "distinguishable": [False, True],
        }
    )
    findings = context_findings(inputs, reliance, comparisons)
    rows = {(r["finding"], r["group"]): r for r in findings.iter_rows(named=True)}
    # Perfect sight vs detector with plain training only (no SwapMix perfect-sight model);
    # SwapMix vs plain for the detector only (one model reads s, none reads pixels twice).
    assert set(rows) == {("perfect_sight_vs_detector", "plain"), ("swapmix_vs_plain", "d")}
    sight = rows[("perfect_sight_vs_detector", "plain")]
    # a - b = sight - det: the stored det - sight comparison with its sign flipped.
    assert (sight["model_a"], sight["model_b"]) == ("sight", "det")
    assert (sight["difference"], sight["low"], sight["high"]) == (-0.2, -0.3, -0.1)
    swap = rows[("swapmix_vs_plain", "d")]
    assert (swap["model_a"], swap["difference"], swap["low"], swap["high"]) == (
        "det-sm",
        -0.1,
        -0.2,
        0.02,
    )
    for row in (sight, swap):
        sentence = finding_sentence(row)
        numbers = [float(x) for x in re.findall(r"[-+]?\d+\.\d{3}", sentence)]
        # reliance a, reliance b, difference, low, high, adjusted p: each as the row has it.
        assert numbers == [
            round(row[k], 3)
            for k in ("reliance_a", "reliance_b", "difference", "low", "high", "p_adjusted")
        ]
        assert "over the 2 pairwise comparisons of context reliance" in sentence
        assert abs(numbers[0] - numbers[1] - numbers[2]) < 1.5e-3
    assert finding_sentence(sight).startswith(
        "With plain training, perfect sight (sight) relies less on context than detector "
        "features (det): reliance 0.100 vs 0.300"
    )
    assert "cannot tell them apart" not in finding_sentence(sight)
    assert finding_sentence(swap).startswith(
        "SwapMix training lowers the context reliance of the models reading d: det-sm 0.200 "
        "vs det 0.300"
    )
    assert finding_sentence(swap).endswith("so the run cannot tell them apart.")
    # Without bootstrap resamples: the point difference and no interval.
    bare = context_findings(inputs, reliance, comparisons.clear())
    assert bare["low"].null_count() == bare.height
    assert "no interval" in finding_sentence(bare.row(0, named=True))
    # Two plain detector models: no unique pair, no finding.
    twice = {**MODELS, "det2": MODELS["det"]}
    more = pl.concat(
        [reliance, pl.DataFrame({"model": ["det2"], "perturbation": ["all"], "reliance": [0.3]})]
    )
    pairs = context_findings(model_inputs(twice, FEATURES), more, comparisons)
    assert pairs.filter(pl.col("finding") == "perfect_sight_vs_detector").is_empty()
