"""Perturbed question sets: one Parquet file per severity, seeded per question, with the
fidelity filter's tries and similarity recorded."""

import numpy as np
import polars as pl
import pytest

from tests.tiny_checkpoints import tiny_sentence_encoder
from vqarobust import store, text
from vqarobust.materialize.questions import Fidelity, fidelity_filter, perturb_question_set


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


def _stub_encode(sentences):
    # Originals point one way; a draw marked "ok" is 0.9-similar, "bad" 0.1-similar.
    out = []
    for s in sentences:
        if "|" not in s:
            out.append([1.0, 0.0])
        elif "|ok|" in s:
            out.append([0.9, np.sqrt(1 - 0.81)])
        else:
            out.append([0.1, np.sqrt(1 - 0.01)])
    return np.array(out, np.float32)


def test_fidelity_filter_resamples_until_similar_enough():
    # Draw `attempt` of question i is similar to the original only from attempt i on.
    originals = ["q0", "q1", "q2", "q3"]

    def draw(i, attempt):
        return f"{originals[i]}|{'ok' if attempt >= i else 'bad'}|{attempt}"

    encode = _stub_encode
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
    perturb_question_set(
        easy_vqa_eval["questions"], out, "char_delete", 0, Fidelity(min_similarity=0.9, max_tries=3)
    )
    got = pl.read_parquet(out[5])
    assert got["tries"].null_count() == 0 and got["tries"].is_between(1, 3).all()
    passed = got.filter(pl.col("tries") < 3)
    assert (passed["similarity"] >= 0.9).all()
    assert got["similarity"].is_between(-1.0001, 1.0001).all()


def test_fidelity_filter_drops_what_stays_dissimilar():
    originals = ["q0", "q1", "q2", "q3"]

    def draw(i, attempt):
        return f"{originals[i]}|{'ok' if attempt >= i else 'bad'}|{attempt}"

    chosen, similarity, tries = fidelity_filter(originals, draw, 0.8, 3, _stub_encode, "drop")
    # q3 needs a fourth try: dropped after max_tries; the others pass as with keep_best.
    assert chosen == ["q0|ok|0", "q1|ok|1", "q2|ok|2", None]
    assert tries.tolist() == [1, 2, 3, 3] and similarity[3] == pytest.approx(0.1)
    with pytest.raises(ValueError, match="on_low_similarity must be one of"):
        fidelity_filter(originals, draw, 0.8, 3, _stub_encode, "discard")


def test_keep_last_keeps_the_last_draw_as_the_multimodal_papers_code():
    """Draws of "q" get similarities 0.5, 0.3, 0.2 (never 0.8): keep_best keeps the first,
    keep_last the third, with its own similarity; a question that passes is the same."""
    sims = {0: 0.5, 1: 0.3, 2: 0.2}

    def encode(sentences):
        out = []
        for s in sentences:
            c = 1.0 if "|" not in s else (0.9 if s.endswith("ok") else sims[int(s.split("|")[1])])
            out.append([c, np.sqrt(1 - c * c)])
        return np.array(out, np.float32)

    def draw(i, attempt):
        return f"{['q', 'p'][i]}|{attempt}|{'ok' if i == 1 and attempt == 1 else 'bad'}"

    best, best_sim, _ = fidelity_filter(["q", "p"], draw, 0.8, 3, encode, "keep_best")
    last, last_sim, tries = fidelity_filter(["q", "p"], draw, 0.8, 3, encode, "keep_last")
    assert best[0] == "q|0|bad" and best_sim[0] == pytest.approx(0.5)
    assert last[0] == "q|2|bad" and last_sim[0] == pytest.approx(0.2)
    assert best[1] == last[1] == "p|1|ok" and tries.tolist() == [3, 2]


@pytest.fixture(scope="module")
def dropped_set(easy_vqa_eval, tmp_path_factory):
    """char_delete at severity 3 with a MiniLM threshold near its median similarity, so
    some questions pass and some are dropped."""
    out = {3: tmp_path_factory.mktemp("drop") / "3.parquet"}
    perturb_question_set(
        easy_vqa_eval["questions"],
        out,
        "char_delete",
        0,
        Fidelity(0.75, max_tries=2, on_low_similarity="drop"),
    )
    return out[3]


def test_dropped_questions_are_null_and_not_asked(easy_vqa_eval, dropped_set):
    from vqarobust import store
    from vqarobust.inference import Subset, subset_questions

    got = pl.read_parquet(dropped_set)
    gone = got.filter(pl.col("perturbed").is_null())
    assert 0 < gone.height < got.height
    # Dropped after every try, each under the threshold; "changed" does not apply.
    assert (gone["tries"] == 2).all() and (gone["similarity"] < 0.75).all()
    assert gone["changed"].null_count() == gone.height
    assert got.filter(pl.col("perturbed").is_not_null())["changed"].null_count() == 0
    questions = store.read_questions(easy_vqa_eval["questions"])
    asked = subset_questions(
        questions, Subset("char_delete", 3, str(easy_vqa_eval["images"]), "text", str(dropped_set))
    )
    assert asked.num_rows == got.height - gone.height
    assert set(asked.column("question_id").to_pylist()).isdisjoint(gone["question_id"])


def _dropped_database(easy_vqa_eval, dropped_set, tmp_path, **options):
    """A database of one model on clean, snow and the dropped char_delete set (which lacks
    the questions the filter dropped): its path, every question, the dropped ids, the
    kept questions."""
    from tests.predictions import write_predictions
    from vqarobust import store
    from vqarobust.db import DatabaseInputs, build_database

    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    gone = set(pl.read_parquet(dropped_set).filter(pl.col("perturbed").is_null())["question_id"])
    kept = [q for q in questions if q["question_id"] not in gone]
    paths = [
        write_predictions(tmp_path, questions, "m", "clean", [0], lambda s: 0.9),
        write_predictions(
            tmp_path, questions, "m", "snow", [1, 2, 3, 4, 5], lambda s: 0.9 - 0.1 * s
        ),
        write_predictions(tmp_path, kept, "m", "char_delete", [3], lambda s: 0.5, modality="text"),
    ]
    db = tmp_path / "r.duckdb"
    build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths, question_set_paths=[dropped_set]),
        families={"char_delete": "char", "snow": "weather"},
        **options,
    )
    return db, questions, gone, kept


def test_the_database_keeps_only_questions_every_set_holds(easy_vqa_eval, dropped_set, tmp_path):
    import duckdb

    from vqarobust.report import render_report

    db, questions, gone, kept = _dropped_database(easy_vqa_eval, dropped_set, tmp_path)
    with duckdb.connect(str(db), read_only=True) as con:
        drops = con.execute("SELECT * FROM fidelity_drops").fetchall()
        asked = dict(con.execute("SELECT modality, max(n) FROM accuracy GROUP BY ALL").fetchall())
        n_questions = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        clean_ids = {
            i
            for (i,) in con.execute(
                "SELECT question_id FROM predictions WHERE modality = 'clean'"
            ).fetchall()
        }
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
    assert drops == [("char_delete", 3, len(gone))]
    # Clean accuracy is over the same questions as the perturbed set: paired.
    assert asked == {"clean": len(kept), "image": len(kept), "text": len(kept)}
    assert n_questions == len(kept)
    assert clean_ids.isdisjoint(gone)
    assert f"{len(gone)} questions some perturbed set dropped" in info["warnings"]
    text = render_report(db, tmp_path / "report" / "index.html").read_text()
    assert "Fidelity filter (drop)." in text and f"{len(gone)} perturbed questions in 1" in text


def test_any_sentence_transformers_encoder_drives_the_filter(easy_vqa_eval, tmp_path):
    from vqarobust.text.encoder import encode

    encoder = tiny_sentence_encoder(tmp_path)
    out = {3: tmp_path / "3.parquet"}
    perturb_question_set(
        easy_vqa_eval["questions"],
        out,
        "keyboard",
        0,
        Fidelity(0.5, max_tries=2, similarity_encoder=str(encoder)),
    )
    got = pl.read_parquet(out[3])
    a = encode(got["original"].to_list(), path=str(encoder))
    b = encode(got["perturbed"].to_list(), path=str(encoder))
    assert a.shape[1] == 32  # not MiniLM's 384
    assert got["similarity"].to_numpy() == pytest.approx(np.einsum("ij,ij->i", a, b), abs=1e-5)


def test_a_hub_id_is_read_from_the_local_cache_only(tmp_path):
    import shutil
    import subprocess
    import sys

    encoder = tiny_sentence_encoder(tmp_path)
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = tmp_path / "hub" / "models--someone--tiny-st"
    shutil.copytree(encoder, repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    script = (
        "from vqarobust.text.encoder import encode; import sys; "
        "print(encode(['what shape is it?'], path=sys.argv[1]).shape)"
    )
    env = {"PATH": "/usr/bin:/bin", "HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    ok = subprocess.run(
        [sys.executable, "-c", script, "someone/tiny-st"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.strip().endswith("(1, 32)")
    missing = subprocess.run(
        [sys.executable, "-c", script, "someone/not-cached"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert missing.returncode != 0
    assert "neither a folder nor in the local Hugging Face cache" in missing.stderr


def test_own_set_leaves_a_dropped_question_only_its_set(easy_vqa_eval, dropped_set, tmp_path):
    import duckdb

    db, questions, gone, kept = _dropped_database(
        easy_vqa_eval, dropped_set, tmp_path, dropped_questions="own_set"
    )
    with duckdb.connect(str(db), read_only=True) as con:
        asked = dict(con.execute("SELECT modality, max(n) FROM accuracy GROUP BY ALL").fetchall())
        n_questions = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
    # Only the set that dropped them lacks them; clean and image subsets keep every one.
    assert asked == {"clean": len(questions), "image": len(questions), "text": len(kept)}
    assert n_questions == len(questions)
    assert f"{len(gone)} questions are missing from some perturbed set" in info["warnings"]
