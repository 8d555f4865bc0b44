"""Basic-question pools from files (VQAv2 JSON with annotations, JSONL, Parquet), the
yes/no rule, merging sources, the BQ dataset export and R_score over a perturbation's
levels."""

import json

import numpy as np
import polars as pl
import pyarrow as pa
import pytest
import yaml

from tests.conftest import REPO
from vqarobust import store
from vqarobust.config import ConfigError, validate_config
from vqarobust.datasets.miniature import write_question_pool
from vqarobust.materialize.questions import build_pool, export_basic_questions
from vqarobust.metrics.rscore import r_score, rscore_tables
from vqarobust.text import pools
from vqarobust.text import ranking as bq


def _encode(sentences):
    # A fixed pseudo-embedding per text: deterministic, no model needed.
    out = []
    for s in sentences:
        v = np.random.default_rng(abs(hash(s)) % 2**32).normal(size=8)
        out.append(v / np.linalg.norm(v))
    return np.array(out, dtype=np.float32)


# VQAv2-style questions with the answer type their annotations give.
VQAV2_STYLE = [
    ("Is the man wearing a hat?", True),
    ("Are there any clouds in the sky?", True),
    ("Does this bus have two levels?", True),
    ("Can you see the ocean?", True),
    ("Was this photo taken at night?", True),
    ("Has the cake been cut?", True),
    ("Do the trees have leaves?", True),
    ("Could this be a hotel room?", True),
    ("Isn't the water calm?", True),
    ("Are there more than 3 people?", True),
    ("Is the plate white or blue?", False),
    ("Is this a cat or a dog?", False),
    ("What color is the bus?", False),
    ("How many people are there?", False),
    ("Where is the cat sitting?", False),
    ("Which hand holds the racket?", False),
    ("Why is the man smiling?", False),
    ("What is on the table?", False),
    ("Who is holding the umbrella?", False),
    ("What sport is being played?", False),
]


@pytest.mark.parametrize("question, yes_no", VQAV2_STYLE)
def test_the_question_form_rule_on_vqav2_style_questions(question, yes_no):
    assert pools.is_yes_no_question(question) is yes_no


def test_a_vqav2_file_with_annotations_deduplicates_and_takes_answer_types(tmp_path):
    paths = write_question_pool(tmp_path, n=300, seed=1)
    frame = pools.read_pool_source(paths["questions"], paths["annotations"])
    assert frame.height == 300 and frame["answer_type"].null_count() == 0
    distinct = pools.distinct_pool(frame)
    texts = [q["question"] for q in json.loads(paths["questions"].read_text())["questions"]]
    assert distinct.height == len({bq.normalize_question(t) for t in texts})
    assert distinct["occurrences"].sum() == 300
    assert set(distinct["yes_no_from"]) == {"annotations"}
    # "Is the dog red or white?" is yes/no by form but "other" by its annotations.
    alt = distinct.filter(pl.col("question").str.contains(" or white"))
    assert alt.height and (alt["yes_no_occurrences"] == 0).all()
    # Without annotations the rule decides, and agrees with these annotations.
    by_rule = pools.distinct_pool(pools.read_pool_source(paths["questions"]))
    assert set(by_rule["yes_no_from"]) == {"rule"}
    assert by_rule["yes_no_occurrences"].to_list() == distinct["yes_no_occurrences"].to_list()


def test_jsonl_and_parquet_pools_and_their_errors(tmp_path):
    rows = [
        {"question": "Is it sunny?"},
        {"question": "is it sunny"},
        {"question": "What is this?", "answer_type": "yes/no"},
        {"question": "  "},
    ]
    jsonl = tmp_path / "pool.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows))
    frame = pools.read_pool_source(jsonl)
    assert frame["question"].to_list() == ["Is it sunny?", "is it sunny", "What is this?"]
    distinct = pools.distinct_pool(frame)
    assert distinct["question"].to_list() == ["Is it sunny?", "What is this?"]
    assert distinct["occurrences"].to_list() == [2, 1]
    # An answer type beats the rule; rows without one use the rule.
    assert distinct["yes_no_occurrences"].to_list() == [2, 1]
    assert distinct["yes_no_from"].to_list() == ["rule", "annotations"]
    parquet = tmp_path / "pool.parquet"
    pl.DataFrame({"question": ["How many?", "Is it?"]}).write_parquet(parquet)
    assert pools.read_pool_source(parquet).height == 2
    with pytest.raises(FileNotFoundError, match="does not exist"):
        pools.read_pool_source(tmp_path / "missing.json")
    (tmp_path / "pool.csv").write_text("question\nx\n")
    with pytest.raises(ValueError, match=r"\.json \(VQA questions\), \.jsonl or \.parquet"):
        pools.read_pool_source(tmp_path / "pool.csv")
    pl.DataFrame({"text": ["x"]}).write_parquet(tmp_path / "bad.parquet")
    with pytest.raises(ValueError, match="no 'question' column"):
        pools.read_pool_source(tmp_path / "bad.parquet")
    (tmp_path / "q.json").write_text(json.dumps({"annotations": []}))
    with pytest.raises(ValueError, match="not a VQA questions file"):
        pools.read_pool_source(tmp_path / "q.json")
    paths = write_question_pool(tmp_path / "vqa", n=10)
    notes = json.loads(paths["annotations"].read_text())
    notes["annotations"] = notes["annotations"][:-2]
    paths["annotations"].write_text(json.dumps(notes))
    with pytest.raises(ValueError, match="no answer type for 2 questions"):
        pools.read_pool_source(paths["questions"], paths["annotations"])


def test_sources_merge_by_normalized_text_and_majority_decides_yes_no(tmp_path):
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    a.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"question": "Is the sky blue?", "answer_type": "yes/no"},
                {"question": "What is it?", "answer_type": "other"},
            ]
        )
    )
    b.write_text(
        "\n".join(
            json.dumps(r)
            for r in [
                {"question": "is the sky blue", "answer_type": "other"},
                {"question": "is the sky blue?", "answer_type": "other"},
                {"question": "What is it?", "answer_type": "yes/no"},
                {"question": "Where?", "answer_type": "other"},
            ]
        )
    )
    tables = []
    for src in (a, b):
        out = tmp_path / f"{src.stem}-table.parquet"
        build_pool(src, out, encode=_encode)
        tables.append(out)
    merged = pools.load_pools(tables)
    assert merged.texts == ["Is the sky blue?", "What is it?", "Where?"]  # first spelling
    # "Is the sky blue?": 1 of 3 occurrences yes/no; "What is it?": 1 of 2 (half counts).
    assert merged.yes_no.tolist() == [False, True, False]
    assert merged.vectors.shape == (3, 8)
    assert merged.vectors[0] == pytest.approx(_encode(["Is the sky blue?"])[0])
    assert pools.pool_sizes(merged) == {"general": 3, "yes_no": 1}


def test_pool_source_names_and_the_config_checks(tmp_path):
    sources = pools.pool_sources(
        ["train"], ["x/v2_train2014_questions.json", {"questions": "y/my pool.jsonl"}]
    )
    assert list(sources) == ["split-train", "file-v2_train2014_questions", "file-my_pool"]
    with pytest.raises(ValueError, match="two pool files are named 'q'"):
        pools.pool_sources([], ["a/q.json", "b/q.jsonl"])
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

    def check(bq_settings):
        validate_config({**base, "basic_questions": {**base["basic_questions"], **bq_settings}})

    check(
        {
            "pool_files": [str(tmp_path / "a.json")],
            "pool": [],
            "datasets": ["general", "yes_no"],
            "lasso": {"mode": "paper", "lambda": 1e-6},
        }
    )
    with pytest.raises(ConfigError, match="bq_lasso and add yes_no to basic_questions.datasets"):
        check({"rankers": ["ynbq_lasso"]})
    with pytest.raises(ConfigError, match="the rankers need a pool"):
        check({"pool": []})
    with pytest.raises(ConfigError, match="two pool files are named"):
        check({"pool_files": ["a/q.json", "b/q.json"]})
    with pytest.raises(ConfigError, match="lasso.mode"):
        check({"lasso": {"mode": "exact"}})
    with pytest.raises(ConfigError, match="datasets"):
        check({"datasets": ["yes-no"]})


def test_export_has_one_row_per_main_question_with_its_ranked_basic_questions(tmp_path):
    questions = [
        {
            "question_id": i,
            "image_id": 7 + i % 2,
            "question": q,
            "answers": ["x"] * 10,
            "question_type": "what",
            "answer_type": "other",
        }
        for i, q in enumerate(["Is it red?", "Is it blue?", "Is it red?"])
    ]
    qpath = tmp_path / "q.parquet"
    store.write_table(pa.Table.from_pylist(questions, schema=store.QUESTION_SCHEMA), qpath)
    pool = [f"Is shape {i} red?" for i in range(8)]
    candidates = bq.make_pool(pool, _encode)
    candidates.yes_no = np.ones(len(pool), dtype=bool)
    table = bq.rank_table(
        ["Is it red?", "Is it blue?"], candidates, ["ynbq_bleu"], bq.RankSettings(6), encode=_encode
    )
    ranks = tmp_path / "r.parquet"
    store.write_table(table.to_arrow(), ranks)
    out_p, out_j = tmp_path / "bqd.parquet", tmp_path / "bqd.json"
    assert export_basic_questions(qpath, ranks, out_p, out_j) == 3
    got = pl.read_parquet(out_p)
    assert got["question_id"].to_list() == [0, 1, 2] and got["image_id"].to_list() == [7, 8, 7]
    assert set(got["dataset"]) == {"yes_no"} and set(got["ranker"]) == {"ynbq_bleu"}
    first = got["basic_questions"][0].to_list()
    assert [b["rank"] for b in first] == list(range(1, 7))
    expected = table.filter(question="Is it red?").sort("rank")
    assert [b["basic_question"] for b in first] == expected["basic_question"].to_list()
    assert [b["score"] for b in first] == expected["score"].to_list()
    records = json.loads(out_j.read_text())
    assert records[2]["question"] == "Is it red?" and len(records[2]["basic_questions"]) == 6
    store.write_table(table.filter(question="Is it red?").to_arrow(), ranks)
    with pytest.raises(ValueError, match="no basic questions for 1 questions"):
        export_basic_questions(qpath, ranks, out_p, out_j)


def test_rscore_overall_is_the_rscore_of_the_mean_deterioration():
    # Clean 0.80; levels 0.78, 0.70, 0.60: drops 2, 10, 20 points, mean 32/3.
    acc = pl.DataFrame(
        {
            "model": ["m"] * 4,
            "perturbation": ["clean", "bq", "bq", "bq"],
            "severity": [0, 1, 2, 3],
            "accuracy": [0.80, 0.78, 0.70, 0.60],
        }
    )
    per_level, overall = rscore_tables(acc, 0.05, 20)
    row = overall.row(0, named=True)
    assert row["perturbation"] == "bq" and row["levels"] == 3
    assert row["acc_di"] == pytest.approx(32 / 3)
    expected = (np.sqrt(20) - np.sqrt(32 / 3)) / (np.sqrt(20) - np.sqrt(0.05))
    assert row["rscore"] == pytest.approx(expected)
    assert row["rscore"] == pytest.approx(r_score(0.80, 0.80 - 32 / 300, 0.05, 20))
    # Not the mean of the per-level scores (the square root is concave).
    mean_of_levels = per_level.filter(pl.col("perturbation") == "bq")["rscore"].mean()
    assert abs(row["rscore"] - mean_of_levels) > 0.05


def test_another_encoder_embeds_the_pool_and_names_its_identity(tmp_path):
    """A local sentence-transformers folder encodes the pool (32 dimensions, not MiniLM's
    384); its identity (a param of the embedding jobs) is its path and SHA-256."""
    import os
    from functools import partial

    from tests.tiny_checkpoints import tiny_sentence_encoder
    from vqarobust.text import encoder as enc

    folder = tiny_sentence_encoder(tmp_path)
    paths = write_question_pool(tmp_path / "pool", n=40)
    out = tmp_path / "pool.parquet"
    build_pool(paths["questions"], out, encode=partial(enc.encode, path=str(folder)))
    merged = pools.load_pools([out])
    assert merged.vectors.shape[1] == 32
    expected = enc.encode(merged.texts[:3], path=str(folder))
    assert merged.vectors[:3] == pytest.approx(expected, abs=1e-6)
    ident = enc.identity(str(folder))
    assert ident["encoder"] == os.path.abspath(folder) and len(ident["sha256"]) == 64
    assert enc.identity(None)["encoder"] == "all-MiniLM-L6-v2"
    with pytest.raises(FileNotFoundError, match="does not exist"):
        enc.identity(str(tmp_path / "missing"))


def test_vqa_v1_files_named_by_release_make_the_same_pool_as_their_questions(tmp_path):
    from tests.vqa_v1_data import write_v1_pool

    folder = tmp_path / "vqa-v1"
    train = write_v1_pool(folder, "train2014", n=120, seed=1)
    val = write_v1_pool(folder, "val2014", n=45, seed=2, task="MultipleChoice")
    entries = [
        {"vqa": "v1", "folder": str(folder), "split": "train2014"},
        {
            "vqa": "v1",
            "folder": str(folder),
            "split": "val2014",
            "task": "MultipleChoice",
            "annotations": False,
        },
    ]
    sources = pools.pool_sources([], entries)
    assert sources == {
        "file-OpenEnded_mscoco_train2014_questions": {
            "split": None,
            "questions": str(train["questions"]),
            "annotations": str(train["annotations"]),
        },
        "file-MultipleChoice_mscoco_val2014_questions": {
            "split": None,
            "questions": str(val["questions"]),
            "annotations": None,
        },
    }
    # The same questions as write_question_pool's VQAv2-layout files: the same pool.
    made = [("train2014", 120, 1), ("val2014", 45, 2)]
    for spec, (split, n, seed) in zip(sources.values(), made, strict=True):
        v1 = pools.distinct_pool(pools.read_pool_source(spec["questions"], spec["annotations"]))
        v2_paths = write_question_pool(tmp_path / "v2" / split, split, n=n, seed=seed)
        notes = v2_paths["annotations"] if spec["annotations"] else None
        v2 = pools.distinct_pool(pools.read_pool_source(v2_paths["questions"], notes))
        assert v1.equals(v2)
        assert v1["occurrences"].sum() == n
    # v1's question ids (image x 10 + n) never pair with VQAv2's (image x 1000 + n).
    v2_train = write_question_pool(tmp_path / "v2" / "train2014", "train2014", n=120, seed=1)
    with pytest.raises(ValueError, match="no answer type for 120 questions.*own annotations"):
        pools.read_pool_source(train["questions"], v2_train["annotations"])
    assert pools.official_files("v2", "d/", "val2014") == {
        "questions": "d/v2_OpenEnded_mscoco_val2014_questions.json",
        "annotations": "d/v2_mscoco_val2014_annotations.json",
    }
    base = yaml.safe_load((REPO / "config" / "config.yaml").read_text())

    def check(entry):
        bq_settings = {**base["basic_questions"], "pool_files": [entry]}
        validate_config({**base, "basic_questions": bq_settings})

    wrong = [
        ({"vqa": "v3", "folder": "d", "split": "val2014"}, r"vqa is one of \('v1', 'v2'\)"),
        (
            {"vqa": "v2", "folder": "d", "split": "val2014", "task": "MultipleChoice"},
            "VQAv2 has no MultipleChoice task",
        ),
        ({"vqa": "v1", "folder": "d", "split": "test2015"}, "test2015 has no public annotations"),
        ({"vqa": "v1", "folder": "d", "split": "val2015"}, "split is one of"),
    ]
    for entry, message in wrong:
        with pytest.raises(ConfigError, match=r"basic_questions.pool_files: " + message):
            check(entry)
    check({"vqa": "v1", "folder": "d", "split": "test2015", "annotations": False})
