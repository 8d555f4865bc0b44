"""The reference checkpoints the default study ships, and freezing new ones."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest

from vqarobust.cli import main
from vqarobust.config import load_config
from vqarobust.digests import tree_sha256
from vqarobust.models.checkpoints import MANIFEST, freeze, manifest_table, verify

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "checkpoints" / "easy-vqa"


def test_the_shipped_checkpoints_are_the_files_their_manifest_names() -> None:
    assert verify(SHIPPED) == []
    manifest = json.loads((SHIPPED / MANIFEST).read_text())
    for name, model in manifest["models"].items():
        assert tree_sha256(SHIPPED / name) == model["sha256"]
        # Only safetensors weights: no pickle is loaded from the repository.
        assert not any(f.endswith((".bin", ".pt", ".pth")) for f in model["files"])


# docs/models.md, "Reference checkpoints": the bar each checkpoint was trained to, and the
# ones that do not reach it (each with the measure it misses; none since the ViLT's 16
# epochs).
BAR = {"clean": 0.90, "blank_ratio": 0.70}
SHORT_OF_THE_BAR: dict[str, list[str]] = {}


def test_the_default_study_evaluates_the_shipped_checkpoints_which_meet_the_bar() -> None:
    config = load_config(ROOT / "config" / "config.yaml")
    manifest = json.loads((SHIPPED / MANIFEST).read_text())
    assert sorted(config["models"]) == sorted(manifest["models"])
    for name, entry in config["models"].items():
        assert "train" not in entry
        assert entry["path_or_id"] == f"checkpoints/easy-vqa/{name}"
        accuracy = manifest["models"][name]["accuracy"]
        assert accuracy["blank"] == pytest.approx(accuracy["clean"] * accuracy["blank_ratio"])
        meets = {
            "clean": accuracy["clean"] >= BAR["clean"],
            "blank_ratio": accuracy["blank_ratio"] <= BAR["blank_ratio"],
        }
        # A shortfall is listed, and only a real one: meeting the bar fails until removed.
        missed = sorted(k for k, ok in meets.items() if not ok)
        assert missed == SHORT_OF_THE_BAR.get(name, []), name
    # The recipe the manifest records is the one config/reference-models.yaml holds.
    study = load_config(ROOT / "config" / "reference-models.yaml")
    for name, model in manifest["models"].items():
        recipe = dict(study["models"][name]["train"], threads=study["threads"]["train"])
        assert model["recipe"] == recipe
    assert manifest["trained_by"]["config"] == "config/reference-models.yaml"


def test_docs_show_the_manifests_table() -> None:
    docs = (ROOT / "docs" / "models.md").read_text()
    begin, end = "<!-- checkpoints:begin -->\n", "<!-- checkpoints:end -->"
    block = docs[docs.index(begin) + len(begin) : docs.index(end)]
    assert block == manifest_table(json.loads((SHIPPED / MANIFEST).read_text()))


def test_the_reference_models_study_trains_each_model_once_and_measures_the_blank(tmp_path):
    import re

    from tests.study_run import run_study

    out = run_study(
        ROOT / "config" / "reference-models.yaml", tmp_path, {}, "-n", "--quiet", "rules"
    )
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    models = len(load_config(ROOT / "config" / "reference-models.yaml")["models"])
    # One inference job per model (clean, blank and the two corruptions at one severity).
    assert counts["train_model"] == models and counts["run_model"] == models


def _study(tmp_path: Path) -> tuple[Path, dict, Path]:
    """A trained-models folder, the study config that names them and a results file."""
    models = tmp_path / "resources" / "models" / "toy"
    (models / "m1" / "sub").mkdir(parents=True)
    (models / "m1" / "config.json").write_text('{"a": 1}')
    (models / "m1" / "sub" / "w.safetensors").write_bytes(b"\0\1\2")
    config = {
        "dataset": {"name": "toy"},
        "threads": {"train": 2},
        "models": {
            "m1": {"family": "vqa-classifier", "train": {"architecture": "vilt", "epochs": 2}},
            "hub": {"family": "vqa-classifier", "path_or_id": "x/y"},
        },
    }
    db = tmp_path / "robustness.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE run_info (key VARCHAR, value VARCHAR)")
        con.execute(
            "INSERT INTO run_info VALUES ('provenance.git_commit', 'abc'), "
            "('provenance.git_dirty', 'false'), ('provenance.version.torch', '2.13.0'), "
            '(\'provenance.model.m1\', \'{"machines": [{"cpu": "X"}]}\')'
        )
        con.execute(
            "CREATE TABLE image_reliance AS SELECT 'm1' AS model, 0.9 AS clean_accuracy, "
            "'blank' AS control, 0.45 AS control_accuracy, 0.5 AS ratio"
        )
        con.execute(
            "CREATE TABLE predictions AS SELECT 'm1' AS model, 'clean' AS perturbation, "
            "range AS question_id FROM range(7)"
        )
    return models, config, db


def test_freeze_copies_the_models_and_writes_digests_recipe_and_accuracy(tmp_path: Path) -> None:
    models, config, db = _study(tmp_path)
    out = tmp_path / "checkpoints"
    manifest = freeze(models, ["m1"], out, config, "study.yaml", db)
    assert (out / "m1" / "sub" / "w.safetensors").read_bytes() == b"\0\1\2"
    m1 = manifest["models"]["m1"]
    assert m1["recipe"] == {"architecture": "vilt", "epochs": 2, "threads": 2}
    assert m1["accuracy"] == {"clean": 0.9, "blank": 0.45, "blank_ratio": 0.5, "questions": 7}
    assert m1["study_machines"] == [{"cpu": "X"}]
    assert sorted(m1["files"]) == ["config.json", "sub/w.safetensors"]
    assert manifest["trained_by"]["git_commit"] == "abc"
    assert manifest["trained_by"]["versions"] == {"torch": "2.13.0"}
    assert json.loads((out / MANIFEST).read_text()) == manifest
    assert verify(out) == []
    assert manifest_table(manifest).splitlines()[2] == (
        f"| `m1` | 0.900 | 0.450 | 50.0% | 7 | 2 | `{m1['sha256'][:12]}` |"
    )
    (out / "m1" / "config.json").write_text('{"a": 2}')
    (out / "m1" / "extra.txt").write_text("x")
    (out / "m1" / "sub" / "w.safetensors").unlink()
    problems = verify(out)
    assert problems[0].startswith("m1/config.json: SHA-256 ")
    assert problems[1:] == ["m1/sub/w.safetensors: missing", "m1/extra.txt: not in the manifest"]


def test_freeze_refuses_a_model_it_cannot_vouch_for(tmp_path: Path) -> None:
    models, config, db = _study(tmp_path)
    with pytest.raises(ValueError, match="model 'hub' has no train section in study.yaml"):
        freeze(models, ["hub"], tmp_path / "c", config, "study.yaml", db)
    config["models"]["m2"] = {"train": {"architecture": "vilt"}}
    with pytest.raises(ValueError, match="holds no blank-image accuracy of 'm2'"):
        freeze(models, ["m2"], tmp_path / "c", config, "study.yaml", db)


def test_checkpoints_verify_command_exits_1_naming_a_changed_file(tmp_path, capsys) -> None:
    models, config, db = _study(tmp_path)
    freeze(models, ["m1"], tmp_path / "c", config, "study.yaml", db)
    assert main(["checkpoints", "verify", str(tmp_path / "c")]) == 0
    (tmp_path / "c" / "m1" / "config.json").write_text("{}")
    assert main(["checkpoints", "verify", str(tmp_path / "c")]) == 1
    assert "m1/config.json: SHA-256" in capsys.readouterr().err
