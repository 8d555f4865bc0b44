"""Sentence-level rewrites through a (tiny, random-init) Hugging Face text-to-text model."""

import polars as pl
import pytest
import yaml

from tests.conftest import REPO
from tests.tiny_checkpoints import tiny_t5
from vqarobust import store, text
from vqarobust.config import ConfigError, validate_config
from vqarobust.materialize.questions import rewrite_question_set
from vqarobust.text.sentence import Rewriter, rewrite


@pytest.fixture(scope="module")
def t5(tmp_path_factory):
    return tiny_t5(tmp_path_factory.mktemp("t5") / "t5")


def test_rewrites_are_the_models_greedy_output(t5):
    questions = ["what color is the shape?", "is there a red circle?"]
    direct = Rewriter(str(t5), prompt="rewrite formal : {question}", max_new_tokens=6)
    out, kept = rewrite(
        questions,
        "formal",
        {"model": str(t5), "prompt": "rewrite formal : {question}", "max_new_tokens": 6},
    )
    expected = direct(questions)
    assert out == [e or q for e, q in zip(expected, questions, strict=True)]
    assert kept == sum(not e for e in expected)
    assert (
        out
        == rewrite(
            questions,
            "formal",
            {"model": str(t5), "max_new_tokens": 6, "prompt": "rewrite formal : {question}"},
        )[0]
    )


def test_back_translation_chains_two_models(t5):
    there = Rewriter(str(t5), max_new_tokens=5)
    back = Rewriter(str(t5), prompt="rewrite : {question}", max_new_tokens=5)
    q = ["how many dogs?"]
    out, _ = rewrite(
        q,
        "back_translation",
        {
            "model": str(t5),
            "back_model": str(t5),
            "back_prompt": "rewrite : {question}",
            "max_new_tokens": 5,
        },
    )
    assert out == [back(there(q))[0] or q[0]]
    with pytest.raises(ValueError, match="back_model"):
        rewrite(q, "back_translation", {"model": str(t5)})


def test_missing_model_fails_with_its_name(tmp_path):
    with pytest.raises(FileNotFoundError, match="model 'formal'"):
        rewrite(["why?"], "formal", {"model": str(tmp_path / "nowhere")})


def test_question_set_of_a_rewrite(t5, easy_vqa_eval, tmp_path):
    out = tmp_path / "formal" / "1.parquet"
    n = rewrite_question_set(
        easy_vqa_eval["questions"], out, "formal", {"model": str(t5), "max_new_tokens": 6}
    )
    got = pl.read_parquet(out)
    assert n == got.height and got.columns == store.QUESTION_SET_SCHEMA.names
    assert set(got["severity"]) == {1} and set(got["perturbation"]) == {"formal"}
    assert (got["perturbed"].str.len_chars() > 0).all()


def test_sentence_perturbations_are_registered_but_not_listed_by_default():
    assert text.names(level="sentence") == sorted(
        ["formal", "casual", "passive", "active", "back_translation"]
    )
    assert "formal" not in text.names()
    with pytest.raises(ValueError, match="rewrites with a model"):
        text.perturb("why?", "formal", 1)


def test_config_checks_sentence_entries():
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["text"]["sentence"] = {"back_translation": {"model": "a"}}
    with pytest.raises(ConfigError, match="back_model"):
        validate_config(config)
    config["text"]["sentence"] = {"formel": {"model": "a"}}
    with pytest.raises(ConfigError, match="did you mean 'formal'"):
        validate_config(config)


def test_sentence_rewrites_do_not_depend_on_the_batch(t5):
    """A rewriter's batch size travels in the runtime channel (it reruns nothing,
    docs/workflow.md): the rewrites are the same for any batch."""
    questions = [
        "what color is the shape?",
        "is there a red circle in the image?",
        "how many?",
        "what shape is on the left side of the picture?",
        "is it blue?",
    ]
    rewrites = [
        Rewriter(str(t5), prompt="rewrite formal : {question}", max_new_tokens=8, batch_size=batch)(
            questions
        )
        for batch in (1, 2, 5)
    ]
    assert rewrites[0] == rewrites[1] == rewrites[2]


def test_a_sampled_rewrite_is_seeded_per_question_and_draw(t5):
    sampled = Rewriter(str(t5), max_new_tokens=8).with_sampling({"top_k": 0, "top_p": 1.0})
    qs = ["what color is the shape?", "is there a red circle?"]
    a = sampled(qs, [1, 2])
    assert a == sampled(qs, [1, 2])  # same seeds, same draws
    assert sampled(qs[::-1], [2, 1]) == a[::-1]  # a question's draw ignores its batch
    draws = {sampled(qs[:1], [s])[0] for s in range(8)}
    assert len(draws) > 1  # it does sample
    with pytest.raises(ValueError, match="one seed per question"):
        sampled(qs)


def test_the_fidelity_filter_redraws_a_sampled_rewrite(t5, easy_vqa_eval, tmp_path):
    """Styleformer's sampling under the paper's filter: a draw under the threshold is
    redrawn from the next seed; keep_last keeps the last draw; a greedy rewrite is
    scored once and dropped under the threshold."""
    import numpy as np

    from vqarobust.materialize.questions import Fidelity
    from vqarobust.seeding import derive_seed
    from vqarobust.text.sentence import SentenceRewrite

    settings = {"model": str(t5), "max_new_tokens": 8, "sampling": {"top_k": 0}}
    questions = store.read_questions(easy_vqa_eval["questions"])
    originals = set(questions.column("question").to_pylist())

    def encode(texts):  # an original is (1, 0); a draw passes (0.95) when its length is even
        passing = [0.95, 0.312]
        return np.array(
            [
                [1.0, 0.0] if t in originals else passing if len(t) % 2 == 0 else [0.0, 1.0]
                for t in texts
            ]
        )

    out = tmp_path / "formal.parquet"
    rewrite_question_set(
        easy_vqa_eval["questions"],
        out,
        "formal",
        settings,
        global_seed=3,
        fidelity=Fidelity(0.9, max_tries=4, on_low_similarity="keep_last"),
        encode=encode,
    )
    got = pl.read_parquet(out)
    assert got["tries"].min() >= 1 and got["tries"].max() <= 4 and got["tries"].max() > 1
    rewriter = SentenceRewrite("formal", settings)
    for row in got.unique("original").iter_rows(named=True):
        q, tries = row["original"], row["tries"]
        last = rewriter([q], [derive_seed(3, "formal", q, tries - 1)])[0][0]
        assert row["perturbed"] == last  # the kept draw is the last one made
        passed = last in originals or len(last) % 2 == 0
        assert passed == (row["similarity"] > 0.9)
        assert passed or tries == 4  # stopped early only on a passing draw

    # A greedy rewrite is scored once (a redraw would repeat it) and, with drop, removed
    # when under the threshold: the multimodal paper's text on every text perturbation.
    # Here every draw that is not an original question scores under 0.9.
    def below(texts):
        return np.array([[1.0, 0.0] if t in originals else [0.0, 1.0] for t in texts])

    greedy = {"model": str(t5), "max_new_tokens": 8}
    for on_low, kept in (("drop", False), ("keep_last", True)):
        rewrite_question_set(
            easy_vqa_eval["questions"],
            out,
            "formal",
            greedy,
            fidelity=Fidelity(0.9, max_tries=4, on_low_similarity=on_low),
            encode=below,
        )
        got = pl.read_parquet(out)
        assert got["tries"].to_list() == [1] * got.height
        assert got["similarity"].max() < 0.9
        once = rewrite(got["original"].to_list(), "formal", greedy)[0]  # empty: the original
        assert got["perturbed"].to_list() == (once if kept else [None] * got.height)
