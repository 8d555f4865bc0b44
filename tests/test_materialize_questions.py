"""Perturbed question sets: one Parquet file per severity, seeded per question, with the
fidelity filter's tries and similarity recorded."""

import numpy as np
import polars as pl
import pytest

from vqarobust import store, text
from vqarobust.materialize.questions import fidelity_filter, perturb_question_set


def test_question_sets_are_written_per_severity(easy_vqa_eval, tmp_path):
    out = {s: tmp_path / f"{s}.parquet" for s in (1, 3, 5)}
    n = perturb_question_set(easy_vqa_eval["questions"], out, "char_swap", global_seed=0)
    questions = pl.from_arrow(store.read_questions(easy_vqa_eval["questions"]))
    assert n == questions.height
    for severity, path in out.items():
        got = pl.read_parquet(path)
        assert got.columns == store.QUESTION_SET_SCHEMA.names
        assert got["question_id"].to_list() == questions["question_id"].to_list()
        assert got["original"].to_list() == questions["question"].to_list()
        assert set(got["severity"]) == {severity} and set(got["perturbation"]) == {"char_swap"}
        assert got["similarity"].null_count() == got.height  # filter off
        expected = [
            text.perturb_item(q, "char_swap", severity, 0, i)
            for q, i in zip(questions["question"], questions["question_id"], strict=True)
        ]
        assert got["perturbed"].to_list() == expected
        original = got["original"].to_list()
        assert got["changed"].to_list() == [a != b for a, b in zip(expected, original, strict=True)]
    # Seeds are per question: a subset of the questions gets the same perturbations.
    half = tmp_path / "half.parquet"
    table = store.read_questions(easy_vqa_eval["questions"])
    store.write_table(table.slice(table.num_rows // 2), half)
    perturb_question_set(half, {3: tmp_path / "h3.parquet"}, "char_swap", global_seed=0)
    part = pl.read_parquet(tmp_path / "h3.parquet")
    whole = pl.read_parquet(out[3]).join(part, on="question_id", suffix="_part")
    assert whole.height == part.height
    assert whole["perturbed"].to_list() == whole["perturbed_part"].to_list()


def test_fidelity_filter_resamples_until_similar_enough():
    # Draw `attempt` of question i is similar to the original only from attempt i on.
    originals = ["q0", "q1", "q2", "q3"]

    def draw(i, attempt):
        return f"{originals[i]}|{'ok' if attempt >= i else 'bad'}|{attempt}"

    def encode(sentences):
        out = []
        for s in sentences:
            if "|" not in s:
                out.append([1.0, 0.0])
            elif "|ok|" in s:
                out.append([0.9, np.sqrt(1 - 0.81)])
            else:
                out.append([0.1, np.sqrt(1 - 0.01)])
        return np.array(out, np.float32)

    chosen, similarity, tries = fidelity_filter(originals, draw, 0.8, 3, encode)
    assert tries.tolist() == [1, 2, 3, 3]
    assert chosen[:3] == ["q0|ok|0", "q1|ok|1", "q2|ok|2"]
    assert similarity[:3] == pytest.approx([0.9] * 3)
    # q3 never passes in 3 tries: the most similar draw is kept and its similarity shows it.
    assert chosen[3].startswith("q3|bad|") and similarity[3] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="max_tries"):
        fidelity_filter(originals, draw, 0.8, 0, encode)


def test_fidelity_filter_with_minilm_records_tries_and_similarity(easy_vqa_eval, tmp_path):
    out = {5: tmp_path / "5.parquet"}
    perturb_question_set(easy_vqa_eval["questions"], out, "char_delete", 0,
                         min_similarity=0.9, max_tries=3)  # fmt: skip
    got = pl.read_parquet(out[5])
    assert got["tries"].null_count() == 0 and got["tries"].is_between(1, 3).all()
    passed = got.filter(pl.col("tries") < 3)
    assert (passed["similarity"] >= 0.9).all()
    assert got["similarity"].is_between(-1.0001, 1.0001).all()
