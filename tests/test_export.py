import json

import polars as pl
import pytest

from tests.predictions import write_predictions
from vqarobust import store
from vqarobust.cli import main
from vqarobust.db import DatabaseInputs, build_database
from vqarobust.export import export_records, sample_records
from vqarobust.materialize.questions import perturb_question_set
from vqarobust.metrics.vqa_accuracy import normalize_answer


@pytest.fixture(scope="module")
def db(easy_vqa_eval, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("export")
    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    sets = {1: tmp / "keyboard-1.parquet"}
    perturb_question_set(easy_vqa_eval["questions"], sets, "keyboard", 0)
    paths = []
    for model in ("m", "n"):
        paths += [
            write_predictions(tmp, questions, model, "clean", [0], lambda s: 0.9),
            write_predictions(tmp, questions, model, "snow", [1, 2, 3, 4, 5], lambda s: 0.8),
            write_predictions(
                tmp, questions, model, "keyboard", [1], lambda s: 0.5, modality="text"
            ),
        ]
    path = tmp / "r.duckdb"
    build_database(
        path,
        DatabaseInputs(easy_vqa_eval["questions"], paths, question_set_paths=[sets[1]]),
        families={"snow": "weather", "keyboard": "char"},
    )
    return path, len(questions), pl.read_parquet(sets[1])


def test_one_record_per_model_subset_and_question(db):
    path, n, keyboard = db
    records = sample_records(path)
    assert records.height == 2 * n * (1 + 5 + 1)
    assert records.select("model", "perturbation", "severity", "question_id").is_unique().all()
    text = records.filter(pl.col("perturbation") == "keyboard", pl.col("model") == "m")
    asked = dict(zip(keyboard["question_id"], keyboard["perturbed"], strict=True))
    assert text["asked"].to_list() == [asked[q] for q in text["question_id"]]
    clean = records.filter(pl.col("perturbation") == "clean")
    assert (clean["asked"] == clean["question"]).all()
    assert records["normalized_prediction"].to_list() == [
        normalize_answer(a) for a in records["prediction"]
    ]
    assert records["git_commit"].n_unique() == 1 and records["config_sha256"].null_count() == 0
    only = sample_records(path, ["n"], ["clean", "keyboard"])
    assert only.height == 2 * n and set(only["model"]) == {"n"}


def test_three_formats_hold_the_same_records(db, tmp_path):
    path, _, _ = db
    records = sample_records(path, ["m"], ["keyboard"])
    parquet = pl.read_parquet(export_records(records, tmp_path / "r.parquet", "parquet"))
    assert parquet.equals(records)
    jsonl = pl.read_ndjson(export_records(records, tmp_path / "r.jsonl", "jsonl"))
    assert jsonl["answers"].to_list() == records["answers"].to_list()
    csv = pl.read_csv(export_records(records, tmp_path / "r.csv", "csv"))
    assert [json.loads(a) for a in csv["answers"]] == records["answers"].to_list()
    with pytest.raises(ValueError, match="format must be one of"):
        export_records(records, tmp_path / "r.xml", "xml")


def test_cli_names_what_is_unknown(db, tmp_path, capsys):
    path, n, _ = db
    assert (
        main(
            [
                "export",
                str(path),
                "--out",
                str(tmp_path / "a.jsonl"),
                "--format",
                "jsonl",
                "--model",
                "m",
                "--perturbation",
                "snow",
            ]
        )
        == 0
    )
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 5 * n
    assert main(["export", str(path), "--out", str(tmp_path / "b.parquet"), "--model", "x"]) == 2
    assert "no model ['x']" in capsys.readouterr().err
    assert not (tmp_path / "b.parquet").exists()
