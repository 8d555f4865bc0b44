"""Runs the Snakemake workflow end to end on a tiny config (a few images, two
corruptions, two severities, seconds of training) and checks what reruns when."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import polars as pl
import pytest
import yaml

from tests.conftest import REPO, chromium
from tests.plans import FROM_PREDICTIONS, analyses, plan, planned_jobs, snakemake, write_config
from vqarobust.metrics.image_reliance import IMAGE_RELIANCE_RATIO
from vqarobust.report.outputs import FIGURES as REPORT_FIGURES

pytestmark = pytest.mark.workflow


# workflow_run: the session's tiny run, shared with the SLURM test (tests/conftest.py).


def test_the_invalidation_matrix_is_snakemakes_own_plan(workflow_run, tmp_path):
    """tests/test_reruns.py computes a change's reruns from two job graphs (params and
    input lists compared, then downstream); on the finished tiny run, for every key it
    changes there, that is exactly the plan of Snakemake's dry run."""
    from tests.plans import jobs, reruns
    from tests.test_reruns import CHANGES, TINY

    workdir = tmp_path / "wf"
    shutil.copytree(workflow_run[0], workdir, symlinks=True)
    write_config(workdir, TINY)
    base = jobs(workdir)
    assert not any(job.needrun for job in base.values())  # a finished run
    wrong = []
    for key, (scenario, edit) in CHANGES.items():
        if scenario != "tiny":
            continue
        config = copy.deepcopy(TINY)
        edit(config)
        write_config(workdir, config)
        after = jobs(workdir)
        planned = {job.stage for job in after.values() if job.needrun} - {"all"}
        if planned != reruns(base, after):
            wrong.append(
                f"{key}: Snakemake plans {sorted(planned)}, the matrix computes "
                f"{sorted(reruns(base, after))}"
            )
    assert not wrong, "\n".join(wrong)


def test_results_and_report(workflow_run):
    workdir, config = workflow_run
    db = workdir / "results" / "easy-vqa" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        assert {
            "questions",
            "predictions",
            "accuracy",
            "submetrics",
            "vre_model",
            "vre_perturbation",
            "question_type_accuracy",
            "answer_type_accuracy",
            "skipped_images",
            "run_info",
        } <= tables
        atypes = {
            a for (a,) in con.execute("SELECT answer_type FROM answer_type_accuracy").fetchall()
        }
        assert atypes == {"yes/no", "other"}
        n_q = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        n_p = con.execute("SELECT count(*) FROM predictions").fetchone()[0]
        # 2 models x (clean + 2 corruptions x 2 severities + blank + 2 text perturbations
        # x 2 severities + 2 rankers x 2 levels), every question each.
        assert n_p == n_q * 2 * (6 + 4 + 4)
        modalities = dict(
            con.execute(
                "SELECT modality, count(DISTINCT model) FROM predictions GROUP BY ALL"
            ).fetchall()
        )
        assert modalities == {"clean": 2, "image": 2, "text": 2, "basic_question": 2}
        sets = con.execute(
            "SELECT perturbation, count(DISTINCT severity), count(*) FROM question_sets "
            "GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        assert sets == [
            ("bq_cosine", 2, 2 * n_q),
            ("bq_lasso", 2, 2 * n_q),
            ("keyboard", 2, 2 * n_q),
            ("synonym_replace", 2, 2 * n_q),
        ]
        vre_modalities = {m for (m,) in con.execute("SELECT modality FROM vre_model").fetchall()}
        assert vre_modalities == {"image", "text"}
        levels = con.execute(
            "SELECT count(*) FROM rscore WHERE modality = 'basic_question'"
        ).fetchone()[0]
        assert levels == 2 * 3 * 2  # models x (2 rankers + all) x levels
        across = con.execute(
            "SELECT DISTINCT \"group\" FROM mmi WHERE scope = 'modality'"
        ).fetchall()
        assert {g for (g,) in across} == {"image", "text", "basic_question", "all"}
        reliance = con.execute("SELECT count(*) FROM image_reliance").fetchone()[0]
        assert reliance == 2  # one blank-control row per model
        models = {m for (m,) in con.execute("SELECT model FROM vre_model").fetchall()}
        assert models == {"vilt-tiny", "cnn-bow"}
        corr = {
            c
            for (c,) in con.execute(
                "SELECT perturbation FROM vre_perturbation WHERE modality = 'image'"
            ).fetchall()
        }
        assert corr == {"gaussian_noise", "brightness"}
        # Intervals beside the point estimates, paired comparisons, drop tests.
        vre = con.execute(
            "SELECT v.vre, i.estimate, i.low, i.high FROM vre_model v JOIN intervals i "
            "ON i.metric = 'vre_model' AND i.model = v.model AND i.modality = v.modality"
        ).fetchall()
        # One kernel for the table and the interval: the estimate is the number, bit for bit.
        assert len(vre) == 4 and all(v == e and lo <= e <= hi for v, e, lo, hi in vre)
        pairs = con.execute("SELECT count(*) FROM model_comparisons").fetchone()[0]
        assert pairs == 1 + 3 + 2  # clean accuracy, perturbed accuracy x 3 modalities, VRE x 2
        cells = con.execute("SELECT count(*) FROM drop_tests").fetchone()[0]
        assert cells == 2 * (2 * 2 + 2 * 2 + 2 * 2)  # models x cells of the three sides
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        assert '"resamples": ' in info["uncertainty"]
        # Quality scores of every corrupted subset and the blank control, per image.
        quality = con.execute(
            "SELECT perturbation, severity, n_images FROM image_quality ORDER BY ALL"
        ).fetchall()
        n_images = con.execute("SELECT count(DISTINCT image_id) FROM questions").fetchone()[0]
        assert quality == [
            ("blank", 1, n_images),
            ("brightness", 1, n_images),
            ("brightness", 3, n_images),
            ("gaussian_noise", 1, n_images),
            ("gaussian_noise", 3, n_images),
        ]
        corr = con.execute("SELECT n_subsets FROM image_quality_correlation").fetchall()
        assert corr == [(4,), (4,)]  # the control stays out of the correlation
        # Attention shift of vilt-tiny (cnn-bow has no attention): 5 + 3 sample questions
        # on each of the 4 corrupted subsets.
        shift = con.execute(
            "SELECT model, count(*), min(n_questions), max(n_questions) FROM attention_shift "
            "GROUP BY ALL"
        ).fetchall()
        assert shift == [("vilt-tiny", 4, 8, 8)]
    # One weight load per model: vilt-tiny's maps come from the weights its answers
    # loaded, in its run_model job (there is no attention job to load them again).
    logs = workdir / "logs" / "easy-vqa"
    for model in ("cnn-bow", "vilt-tiny"):
        log = (logs / "run_model" / f"{model}.log").read_text()
        assert len(re.findall(rf"INFO vqarobust\.inference: loaded {model} on ", log)) == 1
    assert (
        "vilt-tiny: attention maps of 8 questions x 5 subsets"
        in (logs / "run_model" / "vilt-tiny.log").read_text()
    )
    assert not (logs / "image_attention").exists()
    html = (workdir / "results" / "easy-vqa" / "report" / "index.html").read_text()
    assert "VRE per model" in html and "data:image/png;base64," in html
    assert "Uncertainty and significance" in html and "Effective robustness" in html
    assert "Severity calibration" in html and "Attention shift" in html
    for heading in (
        "Question perturbations",
        "MMI image vs text",
        "R_score per model, ranker",
        "Example perturbed questions",
        "R_score1 (general BQ dataset)",
        "Which ranker's noise is level-controllable",
    ):
        assert heading in html
    # The ranker sentence is recomputed from the table beside it; without a ranker whose
    # accuracy moves with the level (these tiny models) the page says nothing of the kind.
    from vqarobust.report.sections.questions import ranker_sentence

    tables = workdir / "results" / "easy-vqa" / "report" / "tables"
    sentence = ranker_sentence(pl.read_csv(tables / "ranker_comparison.csv"))
    if sentence is None:
        assert "The most level-controllable noise" not in html
    else:
        assert sentence.replace("'", "&#39;") in " ".join(html.split())
    assert (workdir / "resources" / "models" / "easy-vqa" / "cnn-bow" / "config.json").exists()


def test_second_run_has_nothing_to_do(workflow_run):
    workdir, _ = workflow_run
    assert plan(workdir) == {}


def test_changing_one_model_reruns_only_its_inference(workflow_run):
    workdir, config = workflow_run
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed["models"]["cnn-bow"]["dtype"] = "bfloat16"
    write_config(workdir, changed)
    try:
        jobs = plan(workdir)
    finally:
        write_config(workdir, config)
    # cnn-bow's one job (clean, 2 corruptions, blank, 2 text perturbations, 2 rankers),
    # then aggregation and report; nothing else.
    assert jobs == {
        "run_model": 1,
        **analyses(*FROM_PREDICTIONS),
        "load_duckdb": 1,
        "render_report": 1,
        "all": 1,
    }


def test_settings_that_cannot_change_answers_rerun_nothing(workflow_run):
    workdir, config = workflow_run
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed["models"]["cnn-bow"]["batch_size"] = 7
    changed["models"]["cnn-bow"]["mem_mb"] = 9000
    changed["storage"] = {"shard_mb": 3}
    # Reordering the keys of a mapping changes nothing either.
    train = changed["models"]["vilt-tiny"]["train"]
    changed["models"]["vilt-tiny"]["train"] = dict(reversed(list(train.items())))
    changed["models"] = dict(reversed(list(changed["models"].items())))
    write_config(workdir, changed)
    try:
        jobs = plan(workdir)
    finally:
        write_config(workdir, config)
    assert jobs == {}


@pytest.mark.parametrize(
    "key, value, rerun",
    [
        (
            "scoring",
            {"metric": "vqa_accuracy_both"},
            tuple(a for a in FROM_PREDICTIONS if a != "costs"),
        ),
        (
            "uncertainty",
            {"resamples": 50, "cluster": "question", "level": 0.9},
            (
                "uncertainty",
                "context_findings",
                "model_cards",
                "image_quality",
                "colour_bias",
                "attention",
            ),
        ),
    ],
)
def test_scoring_and_uncertainty_rerun_only_their_analyses(workflow_run, key, value, rerun):
    workdir, config = workflow_run
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed[key] = value
    write_config(workdir, changed)
    try:
        jobs = plan(workdir)
    finally:
        write_config(workdir, config)
    assert jobs == {**analyses(*rerun), "load_duckdb": 1, "render_report": 1, "all": 1}


def test_adding_a_corruption_runs_only_its_own_jobs(workflow_run):
    workdir, config = workflow_run
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed["corruptions"].append("contrast")
    write_config(workdir, changed)
    try:
        jobs = plan(workdir)
    finally:
        write_config(workdir, config)
    # Each model's job (its other subsets answered from their finished chunks), which also
    # draws the new subset's attention maps: no job of its own for them.
    assert jobs == {
        "corrupt_images": 2,
        "run_model": 2,
        **analyses(*FROM_PREDICTIONS, "attention"),
        "load_duckdb": 1,
        "render_report": 1,
        "all": 1,
    }


def test_adding_a_text_perturbation_or_ranker_runs_only_its_own_jobs(workflow_run):
    workdir, config = workflow_run
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed["text"]["perturbations"].append("word_swap")
    changed["basic_questions"]["rankers"].append("bq_bleu")
    write_config(workdir, changed)
    try:
        jobs = plan(workdir)
    finally:
        write_config(workdir, config)
    # One question set job each, each model's job, the new ranker's exported dataset; the
    # embeddings (pool and main questions) and the other rankers' rankings are reused. The
    # model's job writes its attention table again (its maps from their chunks: the
    # same rows), so the attention analysis reruns too.
    assert jobs == {
        "perturb_questions": 1,
        "rank_basic_questions": 1,
        "noise_questions": 1,
        "export_basic_questions": 1,
        "run_model": 2,
        **analyses(*FROM_PREDICTIONS, "attention"),
        "load_duckdb": 1,
        "render_report": 1,
        "all": 1,
    }


def test_bad_config_fails_before_any_job(tmp_path):
    tiny = (REPO / "tests" / "data" / "tiny_config.yaml").read_text()
    config = yaml.safe_load(tiny)
    config["severitys"] = config.pop("severities")
    write_config(tmp_path, config)
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(tmp_path),
        "--cores",
        "1",
        "-n",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert (
        "config error at (top level): 'severitys' was unexpected; did you mean 'severities'?" in out
    )
    # The message alone: no Python traceback lines.
    assert "Traceback" not in out and 'File "' not in out, out
    assert not (tmp_path / "results").exists() and not (tmp_path / "resources").exists()
    config = yaml.safe_load(tiny)
    config["corruptions"] = ["gaussian_noise", "gausian_blur"]
    write_config(tmp_path, config)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert (
        "corruptions[1]: unknown corruption 'gausian_blur'; did you mean" in out.stdout + out.stderr
    )


# The one lint we accept: conda support was removed (docs/paper.md, "Software"): no
# conda environment could be built or tested offline, and a broken one is not shipped.
NO_SOFTWARE_LINT = "Specify a conda environment or container for each rule."


def test_lint_is_clean_but_for_the_missing_conda_envs():
    out = subprocess.run(
        [sys.executable, "-m", "snakemake", "--lint", "-s", str(REPO / "Snakefile")],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    text = out.stdout + out.stderr
    assert "Lints for snakefile" not in text, text
    titles = set(re.findall(r"^\s+\* (.+):$", text, flags=re.MULTILINE))
    assert titles <= {NO_SOFTWARE_LINT}, text


def test_summary_block_regenerates_from_the_run(workflow_run):
    workdir, _ = workflow_run
    db = workdir / "results" / "easy-vqa" / "robustness.duckdb"
    out = subprocess.run(
        [sys.executable, "-m", "vqarobust.cli", "summary", str(db), "--markdown"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT model, clean_accuracy, vre FROM vre_model WHERE modality = 'image'"
        ).fetchall()
        n_q = con.execute("SELECT count(*) FROM questions").fetchone()[0]
        # The blank-image caveat, recomputed: blank accuracy over clean accuracy.
        ratios = con.execute(
            """SELECT c.model, b.accuracy / c.accuracy FROM accuracy c JOIN accuracy b
                 ON b.model = c.model AND b.perturbation = 'blank'
               WHERE c.modality = 'clean' ORDER BY c.model"""
        ).fetchall()
    assert ratios  # the tiny config runs the blank control
    little = [(m, r) for m, r in ratios if r >= IMAGE_RELIANCE_RATIO]
    for model, ratio in little:
        assert f"{model} keeps {ratio:.0%}" in out, out
    if not little:
        assert f"Every model loses more than {1 - IMAGE_RELIANCE_RATIO:.0%}" in out, out
    iv = r" \[[0-9.]+, [0-9.]+\]"  # every number carries its interval
    for model, clean, vre in rows:
        assert re.search(
            rf"^\| {model} \| {clean:.3f}{iv} \| [0-9.]+{iv} \| [0-9.]+{iv} \| "
            rf"{vre:.3f}{iv} \|",
            out,
            flags=re.MULTILINE,
        ), out
    assert f"{n_q:,} questions" in out


def test_a_rewrite_stylize_and_grayscale_flow_through_to_their_tables(workflow_run, tmp_path):
    """Three perturbations added to a finished run, in one rerun (one run's aggregation
    instead of two): a sentence rewrite (one text level), stylize and grayscale (one
    level). Only their own subsets are made and answered (each model's one job answers
    its other subsets from their finished chunks, loading the weights once), then the
    aggregation."""
    from tests.tiny_checkpoints import style_images, tiny_adain, tiny_t5

    source, config = workflow_run
    workdir = tmp_path / "wf"
    shutil.copytree(source, workdir, symlinks=True)
    changed = yaml.safe_load(yaml.safe_dump(config))
    changed["text"]["sentence"] = {
        "formal": {
            "model": str(tiny_t5(tmp_path / "t5")),
            "prompt": "formal : {question}",
            "max_new_tokens": 6,
        }
    }
    # Grayscale has one level: beside severities [1, 3] it runs at 1 only.
    changed["corruptions"] += ["stylize", "grayscale"]
    changed["stylize"] = {
        "weights": str(tiny_adain(tmp_path / "adain")),
        "styles": str(style_images(tmp_path / "styles")),
    }
    write_config(workdir, changed)
    jobs = plan(workdir)
    assert jobs == {
        "rewrite_questions": 1,
        "corrupt_images": 3,
        "run_model": 2,
        **analyses(*FROM_PREDICTIONS, "attention"),
        "load_duckdb": 1,
        "render_report": 1,
        "all": 1,
    }
    snakemake(workdir)
    for model in config["models"]:
        log = (workdir / "logs" / "easy-vqa" / "run_model" / f"{model}.log").read_text()
        reused = set(re.findall(rf"{model} (\w+)/\d+: reusing (\d+) of \2 finished", log))
        assert {s for s, _ in reused} == {
            "clean",
            "gaussian_noise",
            "brightness",
            "blank",
            "keyboard",
            "synonym_replace",
            "bq_cosine",
            "bq_lasso",
        }, model
        assert log.count(f"loaded {model} on") == 1
    db = workdir / "results" / "easy-vqa" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        rows = con.execute(
            "SELECT DISTINCT model, modality, severity FROM accuracy WHERE perturbation = 'formal'"
        ).fetchall()
        assert sorted(rows) == [("cnn-bow", "text", 1), ("vilt-tiny", "text", 1)]
        # One level: in MMI and R_score, not in the VRE suite.
        vre = con.execute("SELECT count(*) FROM vre_perturbation WHERE perturbation = 'formal'")
        assert vre.fetchone()[0] == 0
        mmi = con.execute("SELECT count(*) FROM mmi WHERE \"group\" = 'formal'").fetchone()[0]
        assert mmi == 2
        row = con.execute(
            "SELECT family, vre FROM vre_perturbation WHERE perturbation = 'stylize'"
        ).fetchone()
        severities = con.execute(
            "SELECT DISTINCT severity FROM accuracy WHERE perturbation = 'stylize' ORDER BY 1"
        ).fetchall()
        grey = con.execute(
            "SELECT DISTINCT severity FROM accuracy WHERE perturbation = 'grayscale'"
        ).fetchall()
        in_vre = con.execute(
            "SELECT count(*) FROM vre_perturbation WHERE perturbation = 'grayscale'"
        ).fetchone()[0]
        bias = con.execute("SELECT model, n_colour_questions FROM colour_bias").fetchall()
        from vqarobust.metrics.colour_bias import colour_questions

        n_colour = colour_questions(con.sql("SELECT * FROM questions").pl()).height
    assert row is not None and row[0] == "stylize"
    assert [s for (s,) in severities] == [1, 3]
    # Grayscale: its accuracy rows, out of VRE (vre.include_grayscale off), colour bias.
    assert grey == [(1,)] and in_vre == 0
    assert sorted(bias) == [("cnn-bow", n_colour), ("vilt-tiny", n_colour)]
    html = (workdir / "results" / "easy-vqa" / "report" / "index.html").read_text()
    assert "Colour bias on grayscale images" in html and "Grayscale is kept out of VRE" in html


def test_report_in_headless_chromium(workflow_run, tmp_path):
    from playwright.sync_api import sync_playwright

    workdir, _ = workflow_run
    index = workdir / "results" / "easy-vqa" / "report" / "index.html"
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(index.as_uri())
        n_images = page.evaluate("document.images.length")
        broken = page.evaluate(
            "Array.from(document.images).filter(i => !i.complete || i.naturalWidth === 0)"
            ".map(i => i.alt)"
        )
        summary = page.inner_text("#summary")
        settings = page.inner_text("#settings")
        questions = page.inner_text("#questions")
        page_text = page.inner_text("body")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    with duckdb.connect(
        str(workdir / "results" / "easy-vqa" / "robustness.duckdb"), read_only=True
    ) as con:
        examples = con.execute("SELECT count(*) FROM misprediction_examples").fetchone()[0]
        tables = {t for (t,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        # The two models' VRE on the image side: told apart or not, by its interval.
        (told_apart,) = con.execute(
            "SELECT distinguishable FROM model_comparisons "
            "WHERE metric = 'vre' AND modality = 'image'"
        ).fetchone()

        def empty(table: str) -> bool:
            return (
                table not in tables
                or not con.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            )

        # Sections and figures without data are left out of the page.
        hidden = {
            "context_reliance": empty("context_reliance"),
            "context_flips": empty("context_examples"),
            "effective_robustness": not con.execute(
                "SELECT count(predicted) FROM effective_robustness"
            ).fetchone()[0],  # two models: rows that say why there is no fit
            "attention_shift": empty("attention_shift"),
        }
    shown = [f for f in REPORT_FIGURES if not hidden.get(f)]
    assert hidden["context_reliance"] and hidden["effective_robustness"]  # 2 models, no swaps
    assert "Visual context (SwapMix)" not in page_text
    # Every figure shown, and the clean and the seen image of each misprediction example
    # (the tiny models may make none: tests/test_mispredictions.py renders some).
    assert errors == [] and broken == [] and n_images == len(shown) + 2 * examples
    assert "has the lowest VRE" in summary and "VRE rank" in summary
    said = "more robust than" if told_apart else "indistinguishable at"
    unsaid = "indistinguishable at" if told_apart else "more robust than"
    assert said in summary and unsaid not in summary
    assert "bq_lasso" in questions and "keyboard" in questions
    assert "scoring" in settings and "{" not in settings  # a table, not raw JSON
    assert (tmp_path / "report.png").stat().st_size > 50_000


def test_native_snakemake_report(workflow_run, tmp_path):
    import zipfile

    workdir, _ = workflow_run
    snakemake(workdir, "--report", str(tmp_path / "report.zip"))
    with zipfile.ZipFile(tmp_path / "report.zip") as zf:
        names = zf.namelist()
    assert any(n.endswith("relative_drop.png") for n in names)
    assert any(n.endswith("index.html") for n in names)


@pytest.mark.parametrize("study", ["scenes", "paper"])
def test_a_shipped_study_is_never_merged_into_the_default(study):
    """Without --replace-workflow-config, --configfile would merge the default's text and
    basic-question study into the shipped one: it fails at once, saying how to run it."""
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-n",
        "-s",
        str(REPO / "Snakefile"),
        "--configfile",
        str(REPO / "config" / f"{study}.yaml"),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode != 0
    assert (
        f"config error at study: '{study}' is a study of its own; run it with "
        "--replace-workflow-config" in out.stdout + out.stderr
    )
    if study == "scenes":  # generated data: its dry run plans jobs with the flag
        ok = subprocess.run(
            [*cmd, "--replace-workflow-config"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
        )
        assert ok.returncode == 0 and "swap_context" in ok.stdout, ok.stderr[-2000:]


def _kill_when(proc: subprocess.Popen, ready, timeout: float = 300) -> bool:
    """SIGKILL the whole process group of ``proc`` once ``ready()`` holds; False when the
    run ended first."""
    import signal
    import time

    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if ready():
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return True
        time.sleep(0.02)
    proc.wait()
    return False


@pytest.mark.slow
def test_a_run_killed_twice_and_resumed_equals_an_uninterrupted_one(workflow_run, tmp_path):
    """The fault campaign: a copy of the finished run loses the ViLT's predictions on one
    subset of each modality and its attention maps (finished chunks too; the CNN's
    inference and the other subsets are the same code and would only lengthen the test)
    and everything after them, is rerun and SIGKILLed as a whole process group twice
    during inference, unlocked and rerun to the end; every DuckDB table then equals the
    uninterrupted run's, row for row (ViLT's patch choice is seeded per image). The last
    run computes the clean subset again, in a job whose other subsets come from chunks."""
    from vqarobust.provenance import diff

    source, _ = workflow_run
    workdir = tmp_path / "wf"
    shutil.copytree(source, workdir, symlinks=True)
    results = workdir / "results" / "easy-vqa"
    vilt = results / "predictions" / "vilt-tiny"
    lost = ("clean", "gaussian_noise", "keyboard", "bq_lasso")
    for subset in lost:
        (vilt / f"{subset}.parquet").unlink()
        shutil.rmtree(vilt / f"{subset}.parquet.chunks")
    for folder in ("attention", "tables", "report"):
        shutil.rmtree(results / folder)
    (results / "robustness.duckdb").unlink()
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        "--rerun-incomplete",
    ]

    def chunks() -> int:
        return len(list(vilt.glob("*.chunks/*.parquet")))

    kept = chunks()  # the four subsets left in place keep theirs
    killed = 0
    for at_least in (1, 3):
        proc = subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )
        killed += _kill_when(proc, lambda n=at_least: chunks() >= kept + n)
        snakemake(workdir, "--unlock")
    assert killed == 2, "the run finished before it could be killed"
    (vilt / "clean.parquet").unlink(missing_ok=True)
    shutil.rmtree(vilt / "clean.parquet.chunks", ignore_errors=True)
    # To the database, which is compared; the report of a resumed run is the workflow's.
    snakemake(workdir, "--rerun-incomplete", "results/easy-vqa/robustness.duckdb")
    log = (workdir / "logs" / "easy-vqa" / "run_model" / "vilt-tiny.log").read_text()
    assert "vilt-tiny clean/0: reusing" not in log and "vilt-tiny blank/1: reusing" in log
    result = diff(
        source / "results" / "easy-vqa" / "robustness.duckdb", results / "robustness.duckdb"
    )
    assert result["tables"] == {} and not result["only_in_a"] and not result["only_in_b"]


def test_the_docs_commands_run_on_a_finished_run(workflow_run, tmp_path):
    """The docs' shell blocks that read a run (the README's command list, docs/metrics.md's
    export) run as written on the tiny run, in a folder that holds the reader's own files
    the commands name (IMG.png, acc.csv, A.duckdb, B.duckdb). The tiny run has no snow and
    a seeded subset of its own: the default's ``snow/3`` and image id stand for the tiny
    run's ``brightness/3`` and one of its images."""
    from PIL import Image

    from tests.doc_blocks import checked, run_commands

    workdir, _ = workflow_run
    for sub in ("results", "resources"):
        (tmp_path / sub).symlink_to(workdir / sub)
    (tmp_path / "config").symlink_to(REPO / "config")
    (tmp_path / "docs").symlink_to(REPO / "docs")
    db = workdir / "results" / "easy-vqa" / "robustness.duckdb"
    Image.new("RGB", (64, 48), (200, 40, 40)).save(tmp_path / "IMG.png")
    for name in ("A.duckdb", "B.duckdb"):
        shutil.copy(db, tmp_path / name)
    with duckdb.connect(str(db), read_only=True) as con:
        image_id = con.execute("SELECT min(image_id) FROM questions").fetchone()[0]
        # The metrics command's long table: the clean accuracy given once per corruption.
        con.execute(
            """COPY (SELECT a.model, a.perturbation, a.severity, a.accuracy
                     FROM accuracy a WHERE a.modality = 'image' AND a.perturbation <> 'blank'
                     UNION ALL
                     SELECT c.model, i.perturbation, 0, c.accuracy FROM accuracy c
                     JOIN (SELECT DISTINCT model, perturbation FROM accuracy
                           WHERE modality = 'image' AND perturbation <> 'blank') i
                       ON i.model = c.model WHERE c.modality = 'clean')
               TO '%s' (HEADER)"""
            % (tmp_path / "acc.csv")
        )
    ran = []
    for block in [b for b in checked("bash") if "results/" in b.text]:
        substitute = {
            "results/easy-vqa/images/snow/3": "results/easy-vqa/images/brightness/3",
            "2": str(image_id),
        }
        ran += run_commands(block.text, tmp_path, substitute)
    assert [argv[1] for argv, _, _ in ran] == [
        "corruptions",
        "families",
        "preview",
        "preview",
        "images",
        "metrics",
        "validate-config",
        "provenance",
        "diff",
        "export",
        "hf-export",
        "plan-size",
        "gpu-hours",
        "export",
    ]
    assert (tmp_path / "grid.png").exists() and (tmp_path / "g.png").exists()
    assert any((tmp_path / "snow3").iterdir()) and (tmp_path / "metrics" / "vre_model.csv").exists()
    assert (tmp_path / "s.jsonl").stat().st_size and (tmp_path / "samples.jsonl").stat().st_size
    assert (tmp_path / "hf" / "data" / "clean-0").is_dir()


def _dry_run_with_package(workdir: Path, package: Path) -> str:
    """A dry run of ``workdir`` whose Snakefile and job params import the package copy
    ``package`` (its parent put first on the path)."""
    env = {**os.environ, "PYTHONPATH": str(package.parent)}
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        "-n",
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    return proc.stdout + proc.stderr


def test_code_edits_rerun_exactly_the_jobs_that_run_that_code(workflow_run, tmp_path):
    """On the finished tiny run, Snakemake's own plan after an edit of package code: the
    body of one corruption reruns its subsets and what reads them (not the other
    corruption, the questions or the rankings); the dataset adapter reruns everything
    from prepare_dataset on; a docstring and a comment rerun nothing."""
    source, _ = workflow_run
    workdir = tmp_path / "wf"
    shutil.copytree(source, workdir, symlinks=True)
    package = tmp_path / "src" / "vqarobust"
    shutil.copytree(
        REPO / "src" / "vqarobust", package, ignore=shutil.ignore_patterns("__pycache__")
    )
    noise, adapter = package / "corruptions" / "noise.py", package / "datasets" / "easy_vqa.py"
    originals = {path: path.read_text() for path in (noise, adapter)}
    noise.write_text(originals[noise].replace('"""Additive N(0, sd^2) noise', '"""Noise'))
    adapter.write_text(f"# A comment.\n{originals[adapter]}".replace("Adapter for", "For"))
    assert "Nothing to be done" in _dry_run_with_package(workdir, package)
    noise.write_text(originals[noise].replace("sd = (0.08,", "sd = (0.081,"))
    out = _dry_run_with_package(workdir, package)
    planned = planned_jobs(out)
    corrupted = set(re.findall(r"wildcards: dataset=easy-vqa, corruption=(\w+)", out))
    assert corrupted == {"gaussian_noise"} and planned["corrupt_images"] == 2
    assert planned["run_model"] == 2 and "image_attention" not in planned
    assert not {
        "prepare_dataset",
        "perturb_questions",
        "rank_basic_questions",
        "noise_questions",
        "train_model",
        "embed_pool",
    } & set(planned)
    noise.write_text(originals[noise])
    adapter.write_text(originals[adapter] + "\n_EDITED = 1\n")
    planned = planned_jobs(_dry_run_with_package(workdir, package))
    everything = planned_jobs(snakemake(workdir, "-n", "--forceall"))
    assert planned == everything and "prepare_dataset" in planned
