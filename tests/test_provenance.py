import json
import os
import shutil
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.conftest import REPO
from vqarobust.cli import main
from vqarobust.db import DatabaseInputs, build_database
from vqarobust.digests import file_sha256, text_sha256, tree_sha256
from vqarobust.inference import Subset, run_inference
from vqarobust.materialize.images import corrupt_subset
from vqarobust.models import ModelRef
from vqarobust.params import canonical
from vqarobust.provenance import code_identity, diff, package_identity, read, source_digests

CONFIG = {"seed": 0, "models": {"cnn": {"family": "vqa-classifier", "train": {"epochs": 1}}}}


@pytest.fixture(scope="module")
def run(checkpoints, easy_vqa_eval, tmp_path_factory):
    """Predictions of one trained model on clean and snow 1-2, and a database of them."""
    root = tmp_path_factory.mktemp("prov")
    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])}
    paths = []
    for name, subsets in (
        ("clean", [Subset("clean", 0, str(easy_vqa_eval["images"]))]),
        ("snow", []),
    ):
        if name == "snow":
            for sev in (1, 2):
                corrupt_subset(easy_vqa_eval["images"], root / f"snow{sev}", "snow", sev)
                subsets.append(Subset("snow", sev, str(root / f"snow{sev}")))
        out = root / f"{name}.parquet"
        run_inference(ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, out, "cpu")
        paths.append(out)
    db = root / "a.duckdb"
    build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths, dataset_info_path=easy_vqa_eval["info"]),
        families={"snow": "weather"},
        config=CONFIG,
        seed=0,
        uncertainty={"resamples": 20},
    )
    return {"db": db, "paths": paths, "root": root}


def test_run_info_holds_code_config_data_weights_and_times(run, checkpoints, easy_vqa_eval):
    info = read(run["db"])
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    # build_database is the library's: no workflow checkout; the package is this editable one.
    assert info["git_commit"] == "null" and info["workflow_dir"] == "null"
    package = json.loads(info["package"])
    assert package["editable"] and package["location"] == str(REPO / "src" / "vqarobust")
    assert package["git_commit"] == head and package["sha256"] == package_identity()["sha256"]
    assert info["version"] == "0.1.0"
    assert info["config_sha256"] == text_sha256(json.dumps(canonical(CONFIG), sort_keys=True))
    assert info["seed"] == "0"
    assert info["dataset.questions.sha256"] == file_sha256(easy_vqa_eval["questions"])
    assert info["dataset.manifest.sha256"] == file_sha256(easy_vqa_eval["manifest"])
    model = json.loads(info["model.cnn"])
    assert model["checkpoint"]["path_or_id"]["sha256"] == tree_sha256(checkpoints["cnn-bow"])
    assert model["train_sha256"] == text_sha256(json.dumps({"epochs": 1}))
    assert model["precision"] == {"device": "cpu", "dtype": "float32"}  # resolved, not "auto"
    assert "conflict" not in model
    assert info["started"] <= info["finished"]
    assert info["prediction_files"] == "2"
    assert info["prediction_files_without_fingerprint"] == "0"
    for package in (
        "python",
        "version.torch",
        "version.transformers",
        "version.snakemake",
        "version.duckdb",
        "version.polars",
    ):
        assert info[package] and info[package] != "not installed"
    # easy-VQA ships in a wheel: no source file to hash, its package version names it.
    assert not any(k.startswith("dataset.source.") for k in info)
    with duckdb.connect(str(run["db"]), read_only=True) as con:
        package = con.execute("SELECT value FROM run_info WHERE key = 'dataset.package'")
        assert package.fetchone()[0].startswith("easy-vqa ")


def test_dataset_sources_are_hashed_when_the_split_is_prepared(tmp_path):
    (tmp_path / "q.json").write_text("{}")
    (tmp_path / "imgs").mkdir()
    (tmp_path / "imgs" / "1.jpg").write_bytes(b"xx")
    digests = source_digests(
        {"questions": str(tmp_path / "q.json"), "images": str(tmp_path / "imgs"), "split": "val"}
    )
    assert digests["questions"]["sha256"] == file_sha256(tmp_path / "q.json")
    assert "listing_sha256" in digests["images"] and "sha256" not in digests["images"]
    assert "split" not in digests


def test_outside_a_checkout_there_is_no_commit(tmp_path):
    assert code_identity(tmp_path) == {"git_commit": None, "git_dirty": None}


def _git(folder, *args):
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, env=env)


def test_an_untracked_module_makes_the_checkout_dirty_an_ignored_file_does_not(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("*.log\n")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", ".")
    _git(tmp_path, "commit", "-qm", "one")
    (tmp_path / "run.log").write_text("ignored\n")
    assert code_identity(tmp_path)["git_dirty"] is False
    (tmp_path / "new_module.py").write_text("y = 2\n")  # not added
    assert code_identity(tmp_path)["git_dirty"] is True


def test_a_workflow_run_records_its_checkout_and_a_folder_that_is_none(
    run, easy_vqa_eval, tmp_path
):
    from vqarobust.provenance import collect

    files = {"questions": easy_vqa_eval["questions"]}
    here = collect(
        config=None,
        prediction_paths=run["paths"],
        dataset_files=files,
        dataset_info={},
        seed=0,
        workflow_dir=REPO,
    )
    head = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert here["provenance.git_commit"] == head
    assert here["provenance.workflow_dir"] == str(REPO)
    elsewhere = collect(
        config=None,
        prediction_paths=run["paths"],
        dataset_files=files,
        dataset_info={},
        seed=0,
        workflow_dir=tmp_path,
    )
    assert elsewhere["provenance.git_commit"] == "null"
    assert elsewhere["provenance.git_dirty"] == "null"


@pytest.mark.slow
def test_a_wheel_in_a_venv_inside_a_checkout_is_named_by_its_files(tmp_path):
    """Installed from a wheel into a venv that lies inside a git checkout, the package is
    not that checkout's code: it has no commit, is not editable, and its digest covers
    the files the distribution installed, so one edited after the install shows."""
    import sys
    import sysconfig

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    _git(checkout, "init", "-q")
    (checkout / "README").write_text("x\n")
    _git(checkout, "add", ".")
    _git(checkout, "commit", "-qm", "one")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path / "dist"),
            str(REPO),
        ],
        check=True,
        capture_output=True,
    )
    venv = checkout / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    wheel = next((tmp_path / "dist").glob("vqarobust-*.whl"))
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run(
        [str(python), "-c", purelib], check=True, capture_output=True, text=True
    ).stdout.strip()
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", site, str(wheel)],
        check=True,
        capture_output=True,
    )
    # The dependencies come from this environment, after the venv's own site-packages.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    code = (
        "import json; from vqarobust.provenance import package_identity; "
        "print(json.dumps(package_identity()))"
    )

    def identity():
        out = subprocess.run(
            [str(python), "-c", code],
            cwd=checkout,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(out)

    first = identity()
    assert first["editable"] is False and first["location"].startswith(site)
    assert "git_commit" not in first and first["files"] > 100
    (Path(first["location"]) / "store.py").write_text("# edited after the install\n")
    assert identity()["sha256"] != first["sha256"]


def test_diff_of_a_copy_is_empty_and_of_another_seed_names_inputs_and_tables(
    run, easy_vqa_eval, capsys
):
    copy = run["root"] / "copy.duckdb"
    shutil.copy(run["db"], copy)
    same = diff(run["db"], copy)
    assert same == {"inputs": {}, "tables": {}, "only_in_a": [], "only_in_b": []}
    assert main(["diff", str(run["db"]), str(copy)]) == 0
    assert "tables: all the same" in capsys.readouterr().out

    other = run["root"] / "b.duckdb"
    build_database(
        other,
        DatabaseInputs(
            easy_vqa_eval["questions"], run["paths"], dataset_info_path=easy_vqa_eval["info"]
        ),
        families={"snow": "weather"},
        config={**CONFIG, "seed": 7},
        seed=7,
        uncertainty={"resamples": 20, "seed": 7},
    )
    result = diff(run["db"], other)
    assert set(result["inputs"]) == {"config_sha256", "seed"}
    assert result["inputs"]["seed"] == ("0", "7")
    assert "intervals" in result["tables"] and "predictions" not in result["tables"]
    assert main(["diff", str(run["db"]), str(other)]) == 1
    out = capsys.readouterr().out
    assert "inputs that differ (2):" in out and "  seed\n    A: 0\n    B: 7" in out
    assert "  intervals: " in out


def test_provenance_cli_prints_every_key_and_refuses_an_old_database(run, tmp_path, capsys):
    assert main(["provenance", str(run["db"])]) == 0
    out = capsys.readouterr().out
    assert "config_sha256: " in out and "model.cnn: " in out and "git_commit: " in out
    old = tmp_path / "old.duckdb"
    with duckdb.connect(str(old)) as con:
        con.execute("CREATE TABLE run_info (key VARCHAR, value VARCHAR)")
    assert main(["provenance", str(old)]) == 2
    assert "holds no provenance" in capsys.readouterr().err


def test_the_report_shows_the_provenance_block(run):
    from vqarobust.report import render_report

    html = render_report(run["db"], run["root"] / "report" / "index.html").read_text()
    from vqarobust.report.sections.provenance import readable

    block = html[html.index('<section id="provenance">') :]
    info = read(run["db"])
    # As a reader reads them: a commit, or "none" where the run was no git checkout.
    assert readable(info["git_commit"]) in block and info["config_sha256"] in block
    assert "dataset.questions.sha256" in block and "model.cnn" in block


def test_model_cards_count_the_loaded_models_parameters(run, checkpoints):
    from vqarobust.models import load_model

    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])},
        name="cnn",
        device="cpu",
    )
    expected = sum(p.numel() for p in model.model.parameters())
    with duckdb.connect(str(run["db"]), read_only=True) as con:
        card = con.sql("SELECT * FROM model_cards").pl().row(0, named=True)
        clean = con.execute("SELECT accuracy FROM accuracy WHERE modality = 'clean'").fetchone()
        vre = con.execute("SELECT vre FROM vre_model WHERE modality = 'image'").fetchone()
    assert card["model"] == "cnn" and card["family"] == "vqa-classifier"
    assert card["parameters"] == expected > 0
    assert card["checkpoint"].startswith(f"{checkpoints['cnn-bow']} (sha256 ")
    assert card["clean_accuracy"] == clean[0] and card["vre"] == vre[0]
    assert card["vre_low"] <= card["vre"] <= card["vre_high"]


def test_a_resumed_job_records_the_parameter_count(checkpoints, easy_vqa_eval, tmp_path):
    """Killed after its first chunk and rerun, the job stores the same count as a fresh one."""
    import pyarrow.parquet as pq

    from vqarobust.models import load_model

    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])}
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]

    def dying(*args, **kwargs):
        model = load_model(*args, **kwargs)
        calls = {"n": 0}
        answer = model.answer

        def once(images, questions):
            calls["n"] += 1
            if calls["n"] > 1:
                raise RuntimeError("killed")
            return answer(images, questions)

        model.answer = once
        return model

    out = tmp_path / "p.parquet"
    with pytest.raises(RuntimeError, match="killed"):
        run_inference(
            ModelRef("cnn", spec, loader=lambda *a, **k: dying(*a, **k)),
            easy_vqa_eval["questions"],
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    assert len(list((tmp_path / "p.parquet.chunks").glob("parameters-*.json"))) == 1
    run_inference(
        ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, out, "cpu", chunk_size=8
    )
    fresh = tmp_path / "fresh.parquet"
    run_inference(
        ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, fresh, "cpu", chunk_size=8
    )

    def count(path):
        return json.loads(pq.read_schema(path).metadata[b"vqarobust.inputs"])["parameters"]

    assert count(out) == count(fresh) > 0
