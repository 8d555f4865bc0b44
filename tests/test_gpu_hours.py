"""GPU-hours before the run: a study config priced from a throughput table or a pilot
(``vqarobust gpu-hours``), its jobs scheduled on N GPUs, the run_model runtime requests
derived from the same table (``resources.throughput``), and the shipped outputs."""

from __future__ import annotations

import copy
import json
from types import SimpleNamespace

import pytest
import yaml

from tests.conftest import REPO
from tests.cost_files import cost_entry as _entry
from tests.cost_files import costed_predictions as _predictions
from vqarobust.cli import main
from vqarobust.config import ConfigError, validate_config
from vqarobust.gpu_hours import schedule
from vqarobust.plan import StudyPlan
from vqarobust.throughput import ThroughputError, read_table, rows_from_markdown

# Every model answers clean (1 level), gaussian_noise (severities 1 and 2) and the blank
# control (1 level): 4 question cells per question.
CONFIG = {
    "dataset": {"name": "easy-vqa", "adapter": "easy-vqa", "n_images": 30},
    "corruptions": ["gaussian_noise"],
    "severities": [1, 2],
    "models": {
        "a": {"family": "vqa-classifier", "path_or_id": "x/a", "device": "cuda", "batch_size": 8},
        "b": {"family": "blip", "path_or_id": "x/b", "device": "cuda", "batch_size": 32},
    },
}


def _row(model, batch, reuse, rate):
    return {
        "model": model,
        "repository": None,
        "batch": batch,
        "share_image_features": reuse,
        "questions_per_s": rate,
        "peak_gib": 1.0,
    }


TABLE = {
    "gpu": "Test GPU",
    "torch": "9.9",
    "transformers": "9.9",
    "source": "by hand",
    # 30 images x 120 questions per image = 3,600 questions per cell.
    "questions_per_image": 120,
    "rows": [
        _row("a", 8, None, 2.0),
        _row("b", 8, True, 1.0),
        _row("b", 32, True, 4.0),
        _row("b", 32, False, 5.0),
    ],
}


@pytest.fixture()
def study(tmp_path, monkeypatch):
    """The config and table files, in a working directory without prepared questions."""
    monkeypatch.chdir(tmp_path)
    table = tmp_path / "table.json"
    table.write_text(json.dumps(TABLE))
    config = tmp_path / "study.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    return SimpleNamespace(config=config, table=table, dir=tmp_path)


def _run(capsys, *args):
    code = main(["gpu-hours", *map(str, args)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _rows(out):
    """Each table row's cells by model."""
    rows = [line for line in out.splitlines() if line.startswith("| ") and "---" not in line]
    return {c[0]: c[1:] for c in ([x.strip() for x in r.strip("|").split("|")] for r in rows)}


def test_gpu_hours_and_wall_time_from_a_table(study, capsys):
    code, out, _ = _run(
        capsys, "--configfile", study.config, "--throughput", study.table, "--gpus", 2
    )
    assert code == 0
    rows = _rows(out)
    # a: 4 cells x 3,600 questions at 2/s = 7,200 s; b (batch 32, reuse on): at 4/s,
    # 3,600 s. One job per model: on 2 GPUs the wall time is a's 2 hours.
    assert rows["a"] == ["a", "batch 8: 2 questions/s", "14,400", "1", "2.00"]
    assert rows["b"] == [
        "b",
        "batch 32, image-feature reuse on: 4 questions/s",
        "14,400",
        "1",
        "1.00",
    ]
    assert rows["total (known)"] == ["", "", "28,800", "2 of 2", "3.00"]
    assert "Wall time on 2 GPUs: 2.00 hours for the 2 known jobs" in out
    assert "no schedule is shorter than 2.00 hours" in out
    assert "- GPU 1 (2.00 h): a\n- GPU 2 (1.00 h): b\n" in out
    # One job per subset: 1,800 + 3,600 + 1,800 s of a's, 900 + 1,800 + 900 s of b's;
    # longest first on 2 GPUs: 3,600 | 1,800 1,800 | 1,800 | 900 900 -> 5,400 s each.
    assert "- With inference_jobs: subset (6 GPU jobs) the known jobs would take 1.50 hours" in out
    assert (
        "Questions: 3,600 per subset and severity (dataset.n_images 30 x the table's 120 "
        "questions per image)" in out
    )
    assert "measured on Test GPU with torch 9.9 and transformers 9.9 by `by hand`" in out
    # The fastest row of b: batch 32 without reuse, 5/s: 14,400 / 5 = 2,880 s.
    code, out, _ = _run(
        capsys, "--configfile", study.config, "--throughput", study.table, "--fastest"
    )
    assert _rows(out)["b"][-1] == "0.80"
    assert "Wall time on 1 GPU: 2.80 hours" in out


def test_a_model_the_table_did_not_measure_is_unknown(study, capsys):
    config = copy.deepcopy(CONFIG)
    config["models"]["c"] = {"family": "vqa-classifier", "path_or_id": "x/c", "device": "cuda"}
    config["models"]["d"] = {"family": "vqa-classifier", "path_or_id": "x/d", "device": "cpu"}
    study.config.write_text(yaml.safe_dump(config))
    args = ["--configfile", study.config, "--throughput", study.table, "--gpus", 2]
    code, out, _ = _run(capsys, *args)
    assert code == 0
    rows = _rows(out)
    assert rows["c"] == ["-", f"not in {study.table}", "14,400", "1", "unknown"]
    assert rows["d"][-2:] == ["0", "- (CPU)"]  # no GPU job, no GPU-hours
    # c is in no sum, and never zero: the known sum is a's and b's.
    assert rows["total (known)"][-2:] == ["2 of 3", "3.00"]
    assert "The 1 unknown jobs would add to it." in out
    assert f"- Unknown: c, not in {study.table} (--model c=MEASURED prices it" in out
    code, out, _ = _run(capsys, *args, "--model", "c=a")
    assert _rows(out)["c"] == ["a", "batch 8: 2 questions/s", "14,400", "1", "2.00"]
    assert _rows(out)["total (known)"][-2:] == ["3 of 3", "5.00"]
    assert "- Unknown" not in out
    code, _, err = _run(capsys, *args, "--model", "z=a")
    assert code == 2 and "--model names ['z'], not models of" in err


def test_a_table_without_a_column_is_refused_naming_it(study, capsys):
    bad = copy.deepcopy(TABLE)
    del bad["rows"][1]["questions_per_s"]
    study.table.write_text(json.dumps(bad))
    code, _, err = _run(capsys, "--configfile", study.config, "--throughput", study.table)
    assert code == 2
    assert f"vqarobust gpu-hours: {study.table}: rows[1] has no questions_per_s" in err
    del bad["gpu"]
    study.table.write_text(json.dumps(bad))
    with pytest.raises(ThroughputError, match="no gpu"):
        read_table(study.table)
    # The config that names it fails at validation, naming the key.
    with pytest.raises(ConfigError, match=r"config error at resources\.throughput: .*no gpu"):
        validate_config(copy.deepcopy(CONFIG) | {"resources": {"throughput": str(study.table)}})
    with pytest.raises(ConfigError, match=r"resources\.throughput: .*no such file"):
        validate_config(copy.deepcopy(CONFIG) | {"resources": {"throughput": "none.json"}})
    with pytest.raises(ConfigError, match=r"resources\.runtime_margin"):
        validate_config(copy.deepcopy(CONFIG) | {"resources": {"runtime_margin": 0.5}})
    # A printed Markdown table without its rate column.
    with pytest.raises(ThroughputError, match="no column questions/s"):
        rows_from_markdown(
            "| model | batch | image-feature reuse | peak GPU GiB |\n|---|\n| a | 1 | - | 1.0 |\n",
            {},
        )
    code, _, err = _run(capsys, "--configfile", study.config)
    assert code == 2 and "give --throughput TABLE or --pilot PILOT" in err
    code, _, err = _run(capsys, "--configfile", study.config, "--gpus", 0)
    assert code == 2 and "--gpus must be at least 1, got 0" in err


def test_longest_first_schedule_by_hand():
    # 3 -> GPU 1, 3 -> GPU 2, 2 -> GPU 1 (5), 2 -> GPU 2 (5), 2 -> GPU 1 (7): LPT's
    # known worst case here (3+3 | 2+2+2 would take 6).
    assert schedule([2, 3, 2, 3, 2], 2) == (7, [[1, 0, 4], [3, 2]])
    assert schedule([5.0], 4) == (5.0, [[0], [], [], []])
    assert schedule([], 2) == (0, [[], []])
    with pytest.raises(ValueError, match="--gpus must be at least 1"):
        schedule([1.0], 0)


def test_gpu_hours_from_a_pilot_on_a_gpu(study, capsys):
    """The pilot path: the pilot's GPU-seconds per question and its load time per job."""
    pilot = study.dir / "pilot"
    for name, modality, severities, gpu in (
        ("clean", "clean", [0], 1.0),
        ("gaussian_noise", "image", [1, 2], 2.0),
    ):
        entries = [
            _entry(modality, name, s, 10, wall_s=gpu * 10, gpu_s=gpu * 10, device="cuda:0")
            for s in severities
        ]
        _predictions(
            pilot / "predictions" / "a" / f"{name}.parquet",
            "a",
            modality,
            name,
            severities,
            10,
            entries,
            load_s=30.0,
        )
    code, out, _ = _run(
        capsys, "--configfile", study.config, "--pilot", pilot, "--questions", 3600, "--gpus", 2
    )
    assert code == 0
    # clean 3,600 x 1 s, gaussian_noise 2 x 3,600 x 2 s, blank 3,600 x 2 s (the image
    # modality's mean) and one load of 30 s: 25,230 s.
    assert _rows(out)["a"] == ["a", "pilot, 3 of 3 subsets", "14,400", "1", "7.01"]
    assert _rows(out)["b"][-1] == "unknown"
    assert "- Unknown: b, not in the pilot (--model b=MEASURED" in out
    assert "Questions: 3,600 per subset and severity (given by --questions)" in out


def _wildcards(model, subset=None):
    return SimpleNamespace(model=model, **({"subset": subset} if subset else {}))


def test_runtime_requests_come_from_the_table(study):
    """With resources.throughput, a run_model job asks for runtime_margin x its estimate
    (at least 10 minutes); a model the table did not measure, or no table, keeps the
    entry's runtime; and nothing the job reads (its params) changes."""
    config = copy.deepcopy(CONFIG)
    config["models"]["c"] = {"family": "vqa-classifier", "path_or_id": "x/c", "runtime": 45}
    fixed = StudyPlan.build(validate_config(copy.deepcopy(config)))
    config["resources"] = {"throughput": str(study.table)}
    derived = StudyPlan.build(validate_config(copy.deepcopy(config)))
    runtime = derived.models.model_runtime
    # a: 7,200 s = 120 min, b: 3,600 s = 60 min, times the default margin 2.
    assert runtime(_wildcards("a")) == 240
    assert runtime(_wildcards("b")) == 120
    assert runtime(_wildcards("c")) == 45  # not in the table
    assert fixed.models.model_runtime(_wildcards("a")) == 60  # the entry's default
    for model in ("a", "b", "c"):
        w = _wildcards(model)
        assert derived.models.model_spec(w) == fixed.models.model_spec(w)
        assert derived.infer.job_params(w) == fixed.infer.job_params(w)
        assert derived.models.model_runtime_options(w) == fixed.models.model_runtime_options(w)
    config |= {
        "inference_jobs": "subset",
        "resources": {**config["resources"], "runtime_margin": 1},
    }
    per_subset = StudyPlan.build(validate_config(copy.deepcopy(config))).models.model_runtime
    assert per_subset(_wildcards("a", "gaussian_noise")) == 60  # 3,600 s
    assert per_subset(_wildcards("b", "clean")) == 15  # 900 s
    fast = copy.deepcopy(TABLE)
    fast["rows"][0]["questions_per_s"] = 3600.0  # a's clean: 1 s
    study.table.write_text(json.dumps(fast))
    per_subset = StudyPlan.build(validate_config(copy.deepcopy(config))).models.model_runtime
    assert per_subset(_wildcards("a", "clean")) == 10  # the floor


def test_the_workflow_requests_the_derived_runtime(tmp_path):
    """Snakemake's run_model jobs carry the derived runtime (a relative table path is
    read from the working directory)."""
    from tests.plans import _dag, write_config

    (tmp_path / "table.json").write_text(json.dumps(TABLE))
    write_config(tmp_path, copy.deepcopy(CONFIG) | {"resources": {"throughput": "table.json"}})
    with _dag(tmp_path) as workflow:
        runtime = {
            job.wildcards["model"]: job.resources["runtime"]
            for job in workflow.dag.jobs
            if job.rule.name == "run_model"
        }
    assert runtime == {"a": 240, "b": 120}


def test_the_shipped_json_table_is_the_measured_markdown(tmp_path):
    """docs/results/gpu-throughput-h200.json holds the rows of the H200 run's Markdown
    (benchmarks/gpu_throughput.py --from-markdown), not numbers typed again."""
    import subprocess
    import sys

    out = tmp_path / "h200.json"
    subprocess.run(
        [
            sys.executable,
            "benchmarks/gpu_throughput.py",
            "--from-markdown",
            "docs/results/gpu-throughput-h200.md",
            "--json",
            str(out),
            "--gpu",
            "NVIDIA H200",
            "--torch",
            "2.11.0+cu130",
            "--transformers",
            "5.25.0",
        ],
        cwd=REPO,
        check=True,
    )
    shipped = REPO / "docs" / "results" / "gpu-throughput-h200.json"
    assert out.read_text() == shipped.read_text()
    table = read_table(shipped)
    assert len(table.rows) == 32
    assert table.models == [
        "vilt-b32",
        "blip-base",
        "vle-base",
        "pnp-vqa-large",
        "llava-1.5-7b",
        "llava-1.5-13b",
    ]


@pytest.mark.parametrize("study_name", ["paper", "modern"])
def test_the_docs_show_the_current_estimate(study_name, monkeypatch, capsys):
    """docs/results/gpu-hours-<study>.md is what the command prints now."""
    monkeypatch.chdir(REPO)
    shown = REPO / "docs" / "results" / f"gpu-hours-{study_name}.md"
    command = shown.read_text().splitlines()[0].removeprefix("<!-- ").removesuffix(" -->")
    args = command.split()[2:]  # after "vqarobust gpu-hours"
    assert main(["gpu-hours", *args, "--check", str(shown)]) == 0, capsys.readouterr().err
