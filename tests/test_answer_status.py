"""Every answer accounted for: requests that got no answer of the model's (an empty,
filtered or cut-off reply, a request failed past its retries, NaN scores) end in their
status, out of every metric, counted per cell; a served model is known by who answers."""

import json
import logging

import numpy as np
import polars as pl
import pytest
import torch
from transformers import AutoModelForVisualQuestionAnswering, AutoProcessor

from tests.chat_server import QUESTIONS, Behaviour, ChatServer, chat_client, solid_images
from vqarobust import store
from vqarobust.analyses.base import Inputs, RunOptions
from vqarobust.analyses.scoring import ANALYSIS as SCORING
from vqarobust.inference import Subset, run_inference
from vqarobust.models import ModelRef
from vqarobust.models.served import BudgetSpent

COST_SECONDS = 10


def answer(image, text):
    """The served model: a fixed short answer, so that no reply is empty by chance."""
    return "yes it is"


def _scripted(n, text):
    """Which reply each question gets: the tests' misbehaving server."""
    if "dogs" in text:  # a 429 storm for these, past any retry budget
        return 429, {"error": "slow down"}
    if "triangle" in text:
        return 200, {"message": {"role": "assistant", "content": None}, "finish_reason": "stop"}
    if "red circle" in text:
        return 200, {
            "message": {"role": "assistant", "content": ""},
            "finish_reason": "content_filter",
        }
    if "color" in text:
        return 200, {
            "message": {"role": "assistant", "content": "", "reasoning_content": "The shape looks"},
            "finish_reason": "length",
        }
    return None


def test_each_way_a_reply_is_no_answer_ends_in_its_status():
    questions = [*QUESTIONS, "what shape is it?"]
    with ChatServer(answer, behaviour=Behaviour("tiny", script=_scripted)) as server:
        client = chat_client(server.base_url, max_retries=1, max_concurrency=1)
        got = client.respond(solid_images(5), questions)
    assert got.status == ["truncated", "filtered", "failed", "empty", "answered"]
    assert got.answers[:4] == [None] * 4 and got.answers[4]
    assert got.finish_reason[:2] == ["length", "content_filter"]
    assert got.raw[0] == "The shape looks"  # the thoughts are kept, never scored
    assert got.raw[2].startswith("failed 2 times, last with HTTP 429")
    # The empty reply and the storm were retried (once each); the others were final.
    assert client.usage()["retries"] == 2
    assert client.usage()["requests"] == 7


def _questions_file(tmp_path, questions):
    rows = [
        {
            "question_id": i,
            "image_id": i,
            "question": q,
            "answers": ["yes"] * 10,
            "question_type": "what",
            "answer_type": "other",
        }
        for i, q in enumerate(questions)
    ]
    table = pl.DataFrame(rows).to_arrow().cast(store.QUESTION_SCHEMA)
    store.write_table(table, tmp_path / "questions.parquet")
    images = [
        {
            "image_id": i,
            "bytes": store.encode_image(np.asarray(im)),
            "format": "png",
            "width": im.width,
            "height": im.height,
        }
        for i, im in enumerate(solid_images(len(rows)))
    ]
    store.write_image_shards(images, tmp_path / "clean")
    return tmp_path / "questions.parquet", tmp_path / "clean"


def _score(tmp_path, predictions, **options):
    info = tmp_path / "info.json"
    info.write_text("{}")
    inputs = Inputs(
        {
            "questions": [str(tmp_path / "questions.parquet")],
            "info": [str(info)],
            "predictions": [str(predictions)],
            "question_sets": [],
        },
        table=lambda name: pl.DataFrame(),
    )
    settings = SCORING.settings_type.from_options(RunOptions(**options))
    return SCORING.run(inputs, settings)


def test_a_served_study_scores_only_answers_and_counts_the_rest(tmp_path):
    questions = [*QUESTIONS, "what shape is it?", "is it big?"]
    qpath, images = _questions_file(tmp_path, questions)
    spec = {"family": "openai-chat", "model": "tiny-llava", "max_new_tokens": 4, "device": "cpu"}
    out = tmp_path / "pred.parquet"
    with ChatServer(answer, behaviour=Behaviour("tiny", "fp1", _scripted)) as server:
        options = {"base_url": server.base_url, "max_retries": 0}
        run_inference(
            ModelRef("served", spec, options=options),
            qpath,
            [Subset("clean", 0, str(images))],
            out,
            chunk_size=3,
        )
    df = pl.read_parquet(out)
    status = dict(zip(df["question_id"], df["status"], strict=True))
    assert status == {
        0: "truncated",
        1: "filtered",
        2: "failed",
        3: "empty",
        4: "answered",
        5: "answered",
    }
    with pytest.raises(ValueError, match=r"served on clean/0 \(4 of 6 unanswered"):
        _score(tmp_path, out)
    result = _score(tmp_path, out, on_failed_answers="skip")
    scored = result.tables["predictions"].frame
    assert sorted(scored["question_id"]) == [4, 5]
    counts = result.tables["answer_status"].frame.row(0, named=True)
    assert (counts["rows"], counts["answered"], counts["unanswered"]) == (6, 2, 4)
    assert (counts["empty"], counts["filtered"], counts["truncated"], counts["failed"]) == (
        1,
        1,
        1,
        1,
    )
    assert counts["flagged"]
    assert result.tables["unanswered"].frame["question_id"].to_list() == [0, 1, 2, 3]
    assert "4 of 6 unanswered: 1 empty, 1 filtered, 1 truncated, 1 failed" in result.warnings[0]
    # What it cost: every request but the probe, and the tokens the server reported (100
    # prompt tokens a reply, a completion token a word of an answered reply; a 429
    # reports none).
    cost = json.loads(_metadata(out))["costs"][0]
    assert cost["requests"] == server.requests - 1 == 6
    assert cost["prompt_tokens"] == 100 * 5
    words = sum(len(r.split()) for r in df.filter(pl.col("status") == "answered")["raw_answer"])
    assert cost["completion_tokens"] == words
    assert cost["questions"] == 6 and cost["wall_s"] > 0 and cost["gpu_s"] is None
    # The costs table holds the same, priced at the config's per-million token prices.
    from vqarobust.analyses.costs import ANALYSIS as COSTS

    prices = {
        "currency": "USD",
        "tokens": {"served": {"prompt_per_million": 2.0, "completion_per_million": 8.0}},
    }
    table = (
        COSTS.run(
            Inputs({"predictions": [str(out)]}, table=lambda name: pl.DataFrame()),
            COSTS.settings_type(prices),
        )
        .tables["costs"]
        .frame.row(0, named=True)
    )
    assert (table["requests"], table["prompt_tokens"], table["completion_tokens"]) == (
        6,
        500,
        words,
    )
    assert table["token_money"] == pytest.approx(500 * 2e-6 + words * 8e-6)
    # The report's warnings and the summary name the flagged cell with the table's counts.
    import duckdb

    from vqarobust.report.sections.warnings import summary

    con = duckdb.connect()
    con.register("counts", result.tables["answer_status"].frame.to_arrow())
    con.execute("CREATE TABLE answer_status AS SELECT * FROM counts")
    con.execute("CREATE TABLE skipped_perturbations (perturbation VARCHAR, reason VARCHAR)")
    con.execute("CREATE TABLE run_info (key VARCHAR, value VARCHAR)")
    assert summary(con)["unanswered"] == (
        "Cells with requests left without the model's answer (out of every metric): served "
        "on clean/0 (4 of 6 unanswered: 1 empty, 1 filtered, 1 truncated, 1 failed)."
    )


def _metadata(path):
    import pyarrow.parquet as pq

    return pq.read_schema(path).metadata[store.INPUTS_KEY]


def test_failed_requests_are_asked_again_and_nothing_else(tmp_path):
    qpath, images = _questions_file(tmp_path, QUESTIONS)
    spec = {"family": "openai-chat", "model": "tiny-llava", "max_new_tokens": 4, "device": "cpu"}
    out = tmp_path / "pred.parquet"
    storm = lambda n, text: (429, {"error": "busy"}) if "dogs" in text else None  # noqa: E731
    subsets = [Subset("clean", 0, str(images))]
    with ChatServer(answer, behaviour=Behaviour(script=storm)) as server:
        options = {"base_url": server.base_url, "max_retries": 0, "max_concurrency": 1}
        run_inference(ModelRef("served", spec, options=options), qpath, subsets, out)
    assert pl.read_parquet(out).filter(pl.col("status") == "failed")["question_id"].to_list() == [2]
    with ChatServer(answer) as server:
        options = {"base_url": server.base_url}
        run_inference(ModelRef("served", spec, options=options), qpath, subsets, out)
    assert server.requests == 2  # the probe and the one failed request
    assert set(pl.read_parquet(out)["status"]) == {"answered"}


def test_another_model_behind_the_server_reuses_no_chunk(tmp_path, caplog):
    qpath, images = _questions_file(tmp_path, QUESTIONS)
    spec = {"family": "openai-chat", "model": "tiny-llava", "max_new_tokens": 4, "device": "cpu"}
    out = tmp_path / "pred.parquet"
    subsets = [Subset("clean", 0, str(images))]
    for served_as, expected in (("tiny-v1", 5), ("tiny-v1", 1), ("tiny-v2", 5)):
        with ChatServer(answer, behaviour=Behaviour(served_as, "fp")) as server:
            options = {"base_url": server.base_url}
            with caplog.at_level(logging.WARNING):
                run_inference(ModelRef("served", spec, options=options), qpath, subsets, out)
        assert server.requests == expected  # 4 questions and the probe; the probe alone
    assert "the served model (replies as tiny-v1, fingerprint fp -> replies as tiny-v2" in (
        caplog.text
    )


def test_a_request_budget_stops_the_job_and_a_rerun_goes_on(tmp_path):
    qpath, images = _questions_file(tmp_path, QUESTIONS)
    spec = {"family": "openai-chat", "model": "tiny-llava", "max_new_tokens": 4, "device": "cpu"}
    out = tmp_path / "pred.parquet"
    subsets = [Subset("clean", 0, str(images))]
    with ChatServer(answer) as server:
        options = {"base_url": server.base_url, "request_budget": 3, "batch_size": 2}
        with pytest.raises(BudgetSpent, match="request budget of 3 requests"):
            run_inference(
                ModelRef("served", spec, options=options), qpath, subsets, out, chunk_size=2
            )
        assert server.requests == 3 and not out.exists()
        options = {"base_url": server.base_url, "request_budget": 3, "batch_size": 2}
        run_inference(ModelRef("served", spec, options=options), qpath, subsets, out, chunk_size=2)
    assert server.requests == 3 + 3  # the probe again, and the two questions left
    assert pl.read_parquet(out).height == 4


def test_nan_scores_are_non_finite_not_label_zero(checkpoints, easy_vqa_eval, tmp_path):
    model = AutoModelForVisualQuestionAnswering.from_pretrained(checkpoints["cnn-bow"])
    processor = AutoProcessor.from_pretrained(checkpoints["cnn-bow"])
    word = "circle"
    ids = processor.tokenizer(word, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        model.word_embeddings.weight[ids] = float("nan")  # half precision gone wrong
    model.save_pretrained(tmp_path / "nan")
    processor.save_pretrained(tmp_path / "nan")
    out = tmp_path / "pred.parquet"
    spec = {"family": "vqa-classifier", "path_or_id": str(tmp_path / "nan")}
    clean = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    run_inference(ModelRef("nan", spec), easy_vqa_eval["questions"], clean, out, device="cpu")
    df = pl.read_parquet(out)
    questions = pl.from_arrow(store.read_questions(easy_vqa_eval["questions"]))
    named = set(questions.filter(pl.col("question").str.contains(word))["question_id"])
    bad = df.filter(pl.col("status") == "non_finite")
    assert named and set(bad["question_id"]) == named
    assert bad["answer"].null_count() == bad.height
    assert set(df.filter(~pl.col("question_id").is_in(named))["status"]) == {"answered"}
    cost = json.loads(_metadata(out))["costs"][0]
    assert cost["requests"] is None and cost["questions"] == df.height


def test_parallel_jobs_of_a_served_model_share_one_resource():
    from types import SimpleNamespace

    import yaml

    from tests.conftest import REPO
    from vqarobust.config import validate_config
    from vqarobust.plan import StudyPlan

    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["models"]["my-vlm"] = {
        "family": "openai-chat",
        "base_url": "http://127.0.0.1:8000/v1",
        "model": "qwen",
        "max_concurrency": 4,
    }
    plan = StudyPlan.build(validate_config(config))
    resources = plan.models.served_resources()
    assert list(resources) == ["served_my_vlm"]
    held = resources["served_my_vlm"]
    assert held(SimpleNamespace(model="my-vlm")) == 4
    assert {held(SimpleNamespace(model=m)) for m in config["models"] if m != "my-vlm"} == {0}


def test_rows_without_a_status_count_a_blank_answer_as_empty():
    from vqarobust.metrics.answer_status import with_status

    rows = pl.DataFrame({"answer": ["yes", "", None, "no"], "status": [None, None, None, "failed"]})
    got = with_status(rows)
    assert got["status"].to_list() == ["answered", "empty", "empty", "failed"]
    assert got["finish_reason"].null_count() == 4
    with pytest.raises(ValueError, match="unknown status"):
        with_status(rows.with_columns(pl.lit("odd").alias("status")))
