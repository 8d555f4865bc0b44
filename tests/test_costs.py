"""What each cell cost: the costs table read from the predictions files' metadata (files
without costs are unknown, never zero), priced by the config's prices, the report's
"What this study cost" section recomputed from the table, and the pilot extrapolation."""

from __future__ import annotations

import copy
import json
import re

import duckdb
import polars as pl
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import REPO
from tests.cost_files import cost_entry as _entry
from tests.cost_files import costed_predictions as _predictions
from tests.cost_files import job_record
from tests.predictions import write_predictions
from vqarobust import reruns, store
from vqarobust.analyses.base import Inputs
from vqarobust.analyses.costs import ANALYSIS, Settings
from vqarobust.cli import main
from vqarobust.config import ConfigError, validate_config
from vqarobust.costs import cost_rows, load_total, price
from vqarobust.db import DatabaseInputs, build_database
from vqarobust.plan import StudyPlan
from vqarobust.report import render_report
from vqarobust.report.sections.costs import cost_sentences, cost_totals, model_costs

PRICES = {
    "currency": "USD",
    "gpu_hour": 2.5,
    "cpu_hour": 0.05,
    "tokens": {"served": {"prompt_per_million": 0.15, "completion_per_million": 0.6}},
}


@pytest.fixture()
def three_files(tmp_path):
    """A local model on a GPU (snow 1-2), a served model (clean), a file without costs."""
    return [
        _predictions(
            tmp_path / "local" / "snow.parquet",
            "local",
            "image",
            "snow",
            [1, 2],
            4,
            [
                _entry(
                    "image",
                    "snow",
                    1,
                    4,
                    wall_s=36.0,
                    cpu_s=72.0,
                    gpu_s=18.0,
                    peak_gpu_bytes=10**9,
                    device="cuda:0",
                ),
                _entry(
                    "image",
                    "snow",
                    2,
                    4,
                    wall_s=40.0,
                    cpu_s=80.0,
                    gpu_s=36.0,
                    peak_gpu_bytes=2 * 10**9,
                    device="cuda:0",
                ),
            ],
            load_s=12.0,
        ),
        _predictions(
            tmp_path / "served" / "clean.parquet",
            "served",
            "clean",
            "clean",
            [0],
            4,
            [
                _entry(
                    "clean",
                    "clean",
                    0,
                    4,
                    wall_s=7.2,
                    cpu_s=3.6,
                    requests=5,
                    retries=1,
                    prompt_tokens=2_000_000,
                    completion_tokens=500_000,
                ),
            ],
            load_s=None,
        ),
        _predictions(tmp_path / "old" / "clean.parquet", "old", "clean", "clean", [0], 4),
    ]


def test_costs_table_sums_each_subset_and_prices_it(three_files):
    result = ANALYSIS.run(Inputs({"predictions": three_files}, lambda name: None), Settings(PRICES))
    costs = result.tables["costs"].frame
    rows = {(r["model"], r["severity"]): r for r in costs.iter_rows(named=True)}
    assert sorted(rows) == [("local", 1), ("local", 2), ("old", 0), ("served", 0)]
    local = rows[("local", 1)]
    assert (local["questions"], local["gpu_s"], local["peak_gpu_bytes"]) == (4, 18.0, 10**9)
    # 18 GPU-s at 2.5/h = 0.0125; 72 CPU-s at 0.05/h = 0.001.
    assert local["gpu_money"] == pytest.approx(0.0125)
    assert local["cpu_money"] == pytest.approx(0.001)
    assert local["token_money"] is None and local["money"] == pytest.approx(0.0135)
    served = rows[("served", 0)]
    # 2M prompt tokens at 0.15/M + 0.5M completion at 0.6/M = 0.6; 3.6 CPU-s = 0.00005.
    assert served["token_money"] == pytest.approx(0.6)
    assert served["gpu_money"] is None and served["money"] == pytest.approx(0.60005)
    assert (served["requests"], served["retries"], served["prompt_tokens"]) == (5, 1, 2_000_000)
    old = rows[("old", 0)]
    # A file without costs: unknown, counted, never zero.
    assert old["known"] is False and old["questions"] == 4
    assert [old[k] for k in ("wall_s", "cpu_s", "gpu_s", "money")] == [None] * 4
    assert set(costs["currency"]) == {"USD"}
    assert len(result.warnings) == 1
    assert "1 of 3 prediction files record no costs" in result.warnings[0]
    assert "their 1 model x subset cells have unknown costs" in result.warnings[0]
    loads = result.tables["model_loads"].frame
    assert loads.rows() == [
        ("local", "snow", True, 12.0),
        ("old", "clean", False, None),
        ("served", "clean", True, None),
    ]


def test_no_price_no_money(three_files):
    costs, _, _ = cost_rows(three_files)
    bare = price(costs, {})
    assert bare["money"].null_count() == bare.height and bare["currency"].null_count() == 3 + 1
    # A GPU price only: the served model (no GPU) and the CPU time stay unpriced.
    gpu = price(costs, {"currency": "EUR", "gpu_hour": 3.6})
    money = dict(zip(gpu["model"] + gpu["severity"].cast(str), gpu["money"], strict=True))
    assert money == {
        "local1": pytest.approx(0.018),
        "local2": pytest.approx(0.036),
        "served0": None,
        "old0": None,
    }
    assert gpu["cpu_money"].null_count() == gpu.height


def test_a_subset_without_an_entry_is_unknown(tmp_path):
    path = _predictions(
        tmp_path / "m" / "snow.parquet",
        "m",
        "image",
        "snow",
        [1, 2],
        3,
        [_entry("image", "snow", 1, 3, wall_s=1.0, cpu_s=2.0)],
    )
    costs, _, unknown = cost_rows([path])
    assert unknown == []
    assert costs.select("severity", "known", "questions", "cpu_s").rows() == [
        (1, True, 3, 2.0),
        (2, False, 3, None),
    ]


def test_a_jobs_one_load_counts_once():
    # A per-model job's outputs each carry the job's load time.
    loads = pl.DataFrame(
        {
            "model": ["a", "a", "a", "b", "c"],
            "file": ["x", "y", "z", "x", "x"],
            "known": [True] * 5,
            "load_s": [3.0, 3.0, 5.0, 3.0, None],
        }
    )
    assert load_total(loads) == (11.0, 3)


def _config() -> dict:
    with open(REPO / "config" / "config.yaml") as fh:
        return yaml.safe_load(fh)


def test_prices_are_validated():
    cfg = validate_config(_config())
    assert cfg["prices"] == {"currency": "USD", "gpu_hour": None, "cpu_hour": None, "tokens": {}}
    good = _config() | {
        "prices": {
            "gpu_hour": 2.5,
            "tokens": {"cnn-bow": {"prompt_per_million": 0.1, "completion_per_million": 0.2}},
        }
    }
    assert validate_config(good)["prices"]["gpu_hour"] == 2.5
    bad = _config() | {
        "prices": {"tokens": {"gpt-x": {"prompt_per_million": 0.1, "completion_per_million": 0.2}}}
    }
    with pytest.raises(ConfigError, match=r"prices\.tokens: \['gpt-x'\] are not models"):
        validate_config(bad)
    with pytest.raises(ConfigError, match=r"prices\.gpu_hour"):
        validate_config(_config() | {"prices": {"gpu_hour": -1}})
    with pytest.raises(ConfigError, match="completion_per_million"):
        validate_config(_config() | {"prices": {"tokens": {"cnn-bow": {"prompt_per_million": 1}}}})
    with pytest.raises(ConfigError, match=r"prices"):
        validate_config(_config() | {"prices": {"per_gpu": 1}})


def test_a_price_reruns_only_the_costs_and_the_report():
    for key in ("prices.currency", "prices.gpu_hour", "prices.tokens.*.prompt_per_million"):
        assert reruns.readers(key) == ["analyze:costs"], key
        assert reruns.dependents(key) == ["analyze:costs", "load_duckdb", "render_report"]
    plan = StudyPlan.build(validate_config(_config() | {"prices": {"cpu_hour": 0.05}}))
    params = plan.analyze.analysis_settings(type("W", (), {"analysis": "costs"}))
    assert params == {
        "prices": {"cpu_hour": 0.05, "currency": "USD", "gpu_hour": None, "tokens": {}}
    }


def test_sentences_by_hand():
    costs = price(cost_rows_frame(), PRICES)
    loads = pl.DataFrame({"model": ["local"], "file": ["snow"], "known": [True], "load_s": [12.0]})
    assert cost_sentences(costs, loads) == [
        "Inference answered 12 questions in 3 model x subset cells of 3 models. The costs of "
        "1 cell are unknown (their predictions were written before costs were recorded) and "
        "are left out of every sum below.",
        # wall 36 + 7.2 = 43.2 s; CPU 72 + 3.6 = 75.6 s; GPU 18 s.
        "The cells of known cost took 0.012 hours of wall-clock time and 0.021 CPU-hours, and "
        "0.005 GPU-hours on the 1 cell computed on a GPU.",
        "Served models made 5 requests (1 retry) and used 2000000 prompt and 500000 "
        "completion tokens.",
        "At the config's prices the priced cells cost 0.614 USD (0.0125 for GPU time, "
        "0.00105 for CPU time, 0.6 for tokens).",
        "Loading the models took 12 s over 1 load, not in the sums above.",
    ]
    assert cost_sentences(price(cost_rows_frame(), {}), loads.clear())[-1] == (
        "No prices are set (prices: in the config), so no money is shown."
    )
    # Only files written before costs were recorded: no sum is claimed.
    unknown = price(cost_rows_frame().filter(pl.col("model") == "old"), PRICES)
    assert cost_sentences(unknown, loads.clear()) == [
        "Inference answered 4 questions in 1 model x subset cell of 1 model. The costs of 1 "
        "cell are unknown (their predictions were written before costs were recorded) and are "
        "left out of every sum below."
    ]


def cost_rows_frame() -> pl.DataFrame:
    """Three cells: a GPU cell, a served cell, an unknown one (as in ``three_files``)."""
    return pl.DataFrame(
        [
            (
                "local",
                "image",
                "snow",
                1,
                "cuda:0",
                True,
                4,
                36.0,
                72.0,
                18.0,
                10**9,
                None,
                None,
                None,
                None,
            ),
            (
                "served",
                "clean",
                "clean",
                0,
                "cpu",
                True,
                4,
                7.2,
                3.6,
                None,
                None,
                5,
                1,
                2_000_000,
                500_000,
            ),
            (
                "old",
                "clean",
                "clean",
                0,
                None,
                False,
                4,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ),
        ],
        schema={
            "model": pl.String,
            "modality": pl.String,
            "perturbation": pl.String,
            "severity": pl.Int16,
            "device": pl.String,
            "known": pl.Boolean,
            "questions": pl.Int64,
            "wall_s": pl.Float64,
            "cpu_s": pl.Float64,
            "gpu_s": pl.Float64,
            "peak_gpu_bytes": pl.Int64,
            "requests": pl.Int64,
            "retries": pl.Int64,
            "prompt_tokens": pl.Int64,
            "completion_tokens": pl.Int64,
        },
        orient="row",
    )


NUMBER = r"([0-9][0-9.e+-]*)"


def _check_sentences(sentences: list[str], costs: pl.DataFrame) -> None:
    """Every number of the sentences recomputed from the table's rows by hand."""
    rows = costs.to_dicts()
    known = [r for r in rows if r["known"]]
    text = " ".join(sentences)
    asked = re.search(rf"answered {NUMBER} questions? in {NUMBER} model x subset cells?", text)
    assert int(asked[1]) == sum(r["questions"] for r in rows) and int(asked[2]) == len(rows)
    hours = re.search(rf"took {NUMBER} hours of wall-clock time and {NUMBER} CPU-hours", text)
    assert float(hours[1]) == pytest.approx(sum(r["wall_s"] for r in known) / 3600, rel=5e-3)
    assert float(hours[2]) == pytest.approx(sum(r["cpu_s"] for r in known) / 3600, rel=5e-3)
    gpu = re.search(rf"and {NUMBER} GPU-hours on the {NUMBER} cells?", text)
    gpu_rows = [r for r in known if r["gpu_s"] is not None]
    assert float(gpu[1]) == pytest.approx(sum(r["gpu_s"] for r in gpu_rows) / 3600, rel=5e-3)
    assert int(gpu[2]) == len(gpu_rows)
    money = re.search(rf"priced cells cost {NUMBER} USD", text)
    priced = [r["money"] for r in rows if r["money"] is not None]
    assert float(money[1]) == pytest.approx(sum(priced), rel=5e-3)


def test_report_section_in_headless_chromium(easy_vqa_eval, tmp_path):
    """A results file of two models whose predictions carry costs (one GPU model), and a
    third's without: the section's sentences are sums of the costs table, and the page renders."""
    from playwright.sync_api import sync_playwright

    from tests.conftest import chromium

    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    n, paths = len(questions), []
    for model, gpu in (("good", 0.5), ("bad", None)):
        for name, severities in (("clean", [0]), ("snow", [1, 2, 3, 4, 5])):
            path = write_predictions(
                tmp_path, questions, model, name, severities, lambda s: 0.9 - 0.05 * s
            )
            modality = "clean" if name == "clean" else "image"
            entries = [
                _entry(
                    modality,
                    name,
                    s,
                    n,
                    wall_s=n * 0.1 * (s + 1),
                    cpu_s=n * 0.2,
                    gpu_s=None if gpu is None else n * gpu,
                    device="cpu" if gpu is None else "cuda:0",
                )
                for s in severities
            ]
            table = pq.read_table(path)
            record = {
                "inputs": job_record(model),
                "started": 0.0,
                "finished": 1.0,
                "costs": entries,
                "load_s": 2.0,
            }
            meta = {store.INPUTS_KEY: json.dumps(record).encode("utf-8")}
            store.write_table(table.replace_schema_metadata(meta), path)
            paths.append(path)
    for name, severities in (("clean", [0]), ("snow", [1, 2, 3, 4, 5])):
        paths.append(
            write_predictions(tmp_path, questions, "older", name, severities, lambda s: 0.5)
        )
    db = tmp_path / "robustness.duckdb"
    build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths),
        families={"snow": "weather"},
        prices=PRICES,
    )
    out = render_report(db, tmp_path / "report" / "index.html")
    with duckdb.connect(str(db), read_only=True) as con:
        costs = con.sql("SELECT * FROM costs").pl()
        loads = con.sql("SELECT * FROM model_loads").pl()
    assert costs.height == 3 * 6 and costs.filter(~pl.col("known")).height == 6
    sentences = cost_sentences(costs, loads)
    _check_sentences(sentences, costs)
    # Each model's job loaded it once (2 s), every output of the job recording it.
    assert sentences[-1] == "Loading the models took 4 s over 2 loads, not in the sums above."
    csv = pl.read_csv(out.parent / "tables" / "model_costs.csv")
    assert csv["model"].to_list() == ["bad", "good", "older"]
    assert model_costs(costs)["unknown_cells"].to_list() == [0, 0, 6]
    assert cost_totals(costs)["questions"] == 18 * n
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(out.as_uri())
        section = page.inner_text("#costs")
        header = page.eval_on_selector_all("#costs th", "cells => cells.map(c => c.textContent)")
        rows = page.eval_on_selector_all("#costs tr", "rows => rows.length")
        page.locator("#costs").screenshot(path=str(tmp_path / "costs.png"))
        browser.close()
    assert errors == []
    assert section.startswith("What this study cost")
    for s in sentences:
        assert s in section
    assert header[:4] == ["model", "cells", "unknown_cells", "questions"] and rows == 1 + 3


def _pilot(root, per_question: dict[str, tuple[str, list[int], float]], n: int = 10) -> None:
    """A pilot results folder of vilt-tiny: per subset its modality, severities and CPU
    seconds per question."""
    for name, (modality, severities, cpu) in per_question.items():
        entries = [_entry(modality, name, s, n, wall_s=cpu * n, cpu_s=cpu * n) for s in severities]
        _predictions(
            root / "predictions" / "vilt-tiny" / f"{name}.parquet",
            "vilt-tiny",
            modality,
            name,
            severities,
            n,
            entries,
            load_s=30.0,
        )


def test_cost_estimate_scales_a_pilot(tmp_path, capsys):
    pilot = tmp_path / "results" / "easy-vqa"
    _pilot(
        pilot,
        {
            "clean": ("clean", [0], 1.0),
            "gaussian_noise": ("image", [1, 2], 2.0),
            "keyboard": ("text", [1], 0.5),
        },
    )
    target = _config() | {"prices": {"currency": "USD", "cpu_hour": 0.36}}
    config = tmp_path / "target.yaml"
    config.write_text(yaml.safe_dump(target))
    plan = StudyPlan.build(validate_config(copy.deepcopy(target)))
    subsets = [plan.catalogue[s] for s in plan.infer.model_subsets("vilt-tiny")]
    image = sum(len(s.severities) for s in subsets if s.modality == "image")
    text = sum(len(s.severities) for s in subsets if s.modality == "text")
    unknown = [s.name for s in subsets if s.modality not in ("clean", "image", "text")]
    # 100 questions: clean 1 s each; every image cell 2 s (gaussian_noise's own mean, and
    # the image modality's); every text cell 0.5 s (keyboard's).
    cpu = 100 * (1.0 + 2.0 * image + 0.5 * text)
    assert (
        main(
            [
                "cost-estimate",
                "--pilot",
                str(pilot),
                "--configfile",
                str(config),
                "--questions",
                "100",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| vilt-tiny"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == f"{len(subsets) - len(unknown)} of {len(subsets)}"
    assert float(cells[4]) == pytest.approx(cpu / 3600, rel=5e-3)
    assert float(cells[6]) == pytest.approx(30.0 / 3600, rel=5e-3)  # one job, one load
    assert float(cells[10]) == pytest.approx(cpu / 3600 * 0.36, rel=5e-3)
    assert cells[3] == "unknown"  # the pilot ran on the CPU: no GPU-hours to scale
    assert "| cnn-bow | cnn-bow | 0 of" in out
    assert "- Unknown: cnn-bow, not in the pilot (--model cnn-bow=PILOT_MODEL" in out
    assert f"- Unknown: vilt-tiny, {len(unknown)} subsets (no pilot cell)" in out
    assert "Assumption: a target cell (model x subset x severity) asks every question" in out
    assert "Target questions: 100 (given by --questions)." in out
    # The sums over the models: cnn-bow's are unknown, so they are vilt-tiny's.
    total = next(line for line in out.splitlines() if line.startswith("| total (known)"))
    assert total.split("|")[4:] == row.split("|")[4:]
    # cnn-bow scaled from the pilot's vilt-tiny: the same estimate.
    assert (
        main(
            [
                "cost-estimate",
                "--pilot",
                str(pilot),
                "--configfile",
                str(config),
                "--questions",
                "100",
                "--model",
                "cnn-bow=vilt-tiny",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    twin = next(line for line in out.splitlines() if line.startswith("| cnn-bow"))
    assert twin.split("|")[3:] == row.split("|")[3:]
    assert main(["cost-estimate", "--pilot", str(tmp_path), "--configfile", str(config)]) == 2
    assert "neither a results DuckDB file nor a results folder" in capsys.readouterr().err


def test_cost_estimate_from_a_results_database(tmp_path, monkeypatch):
    """A pilot DuckDB file: its costs, and its questions per image, which scale the
    target's dataset.n_images where the target has no prepared questions."""
    from vqarobust.cost_estimate import estimate, read_pilot, target_questions

    costs = price(cost_rows_frame(), {}).with_columns(pl.col("model").replace("local", "good"))
    db = tmp_path / "pilot.duckdb"
    with duckdb.connect(str(db)) as con:
        con.register("frame", costs.to_arrow())
        con.execute("CREATE TABLE costs AS SELECT * FROM frame")
        # 12 questions on 3 images: 4 per image.
        con.execute(
            "CREATE TABLE questions AS SELECT range AS question_id, "
            "range % 3 AS image_id FROM range(12)"
        )
    pilot = read_pilot(db)
    assert pilot.questions_per_image == 4.0
    plan = StudyPlan.build(validate_config(_config()))  # dataset.n_images: 200
    monkeypatch.chdir(tmp_path)  # no prepared questions here
    questions = target_questions(plan, None, pilot)
    assert questions == (800, "dataset.n_images 200 x the pilot's 4 questions per image")
    per_model, cells = estimate(pilot, plan, questions[0], {"vilt-tiny": "good"})
    vilt = per_model.row(by_predicate=pl.col("model") == "vilt-tiny", named=True)
    # good's only known cells are snow 1 (image): 72 CPU-s over 4 questions, 18 s per
    # question; every image cell of the target is scaled from it, 800 questions each.
    mine = cells.filter(pl.col("model") == "vilt-tiny")
    image = mine.filter(pl.col("modality") == "image")
    assert set(image.filter(pl.col("subset") == "snow")["basis"]) == {"same subset"}
    assert set(image.filter(pl.col("subset") != "snow")["basis"]) == {"same modality"}
    assert vilt["cpu_s"] == pytest.approx(18.0 * image["questions"].sum())
    assert vilt["gpu_s"] == pytest.approx(4.5 * image["questions"].sum())
    assert set(mine.filter(pl.col("modality") != "image")["basis"]) == {"no pilot cell"}
    assert set(cells.filter(pl.col("model") == "cnn-bow")["basis"]) == {"model not in pilot"}
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    with pytest.raises(ValueError, match="no table costs"):
        read_pilot(tmp_path / "empty.duckdb")
