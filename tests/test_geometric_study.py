"""config/geometric.yaml: the geometric, resolution and occlusion families beside the
benchmark's ImageNet-C corruptions. Its plan as shipped, and a miniature end to end with
the per-family tables, their intervals, the flip's marking and the report's answer to
"which family hurts this model most?"."""

from __future__ import annotations

import re

import duckdb
import pytest
import yaml

from tests.conftest import REPO
from tests.study_run import run_study
from vqarobust import corruptions

STUDY = REPO / "config" / "geometric.yaml"


def _checkpoints(workdir):
    (workdir / "checkpoints").symlink_to(REPO / "checkpoints")


def test_the_shipped_config_sets_the_new_families_beside_imagenet_c():
    config = yaml.safe_load(STUDY.read_text())
    names = config["corruptions"]
    assert set(corruptions.names(benchmark=True)) <= set(names)
    families = {corruptions.family(n) for n in names}
    assert {"geometric", "resolution", "occlusion"} <= families
    # Every one easy-VQA can run: it has no boxes (tests/test_box_corruptions.py).
    boxfree = {n for n in corruptions.names() if corruptions.needs(n) is None}
    assert set(corruptions.names(family="geometric")) & boxfree <= set(names)
    assert set(corruptions.names(family="occlusion")) & boxfree <= set(names)
    assert config["study"] == "geometric" and config["dataset"]["n_images"] == 200


def test_its_dag_plans_every_subset_for_both_models(tmp_path):
    """25 corruptions: 24 at 5 severities, the flip at 1, and the blank control, one
    corrupt_images job each; both models on the clean images and on each corruption's
    and the control's subsets (one run_model job per model, all subsets)."""
    _checkpoints(tmp_path)
    out = run_study(STUDY, tmp_path, {}, "-n", "--quiet", "rules")
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    assert counts["corrupt_images"] == 24 * 5 + 1 + 1
    assert counts["run_model"] == 2  # one job per model, answering its 1 + 25 + 1 subsets


@pytest.mark.workflow
@pytest.mark.slow
def test_a_miniature_runs_end_to_end(tmp_path):
    """Four images, one model, rotate and native low resolution at severities 1 and 5,
    and the flip: the database holds VRE per family with intervals, the flip's marks, the
    small images' sizes, and the report says which family costs the model most (the
    occlusion family runs through the workflow in tests/test_scenes.py)."""
    _checkpoints(tmp_path)
    config = yaml.safe_load(STUDY.read_text())
    config["dataset"]["n_images"] = 4
    config.update(
        corruptions=["rotate", "low_resolution", "horizontal_flip"], controls=[], severities=[1, 5]
    )
    config["models"] = {"cnn-bow": config["models"]["cnn-bow"]}
    config["uncertainty"] = {"resamples": 20}
    miniature = tmp_path / "geometric-miniature.yaml"
    miniature.write_text(yaml.safe_dump(config))
    run_study(miniature, tmp_path, {})
    db = tmp_path / "results" / "easy-vqa-geometric" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        family = con.sql(
            "SELECT family, n_perturbations, relative_drop, vre FROM vre_family "
            "WHERE modality = 'image' ORDER BY family"
        ).pl()
        intervals = con.sql(
            "SELECT perturbation, estimate, low, high FROM intervals "
            "WHERE metric = 'relative_drop_family' ORDER BY perturbation"
        ).pl()
        marks = con.sql("SELECT count(*) FROM flip_marks").fetchall()[0][0]
        results = tmp_path / "results" / "easy-vqa-geometric"
        low = con.sql(
            f"SELECT DISTINCT regexp_extract(filename, '/(\\d)/shard', 1)::INT, width, height "
            f"FROM read_parquet('{results}/images/low_resolution/*/shard-*.parquet', "
            "filename = true) ORDER BY ALL"
        ).fetchall()
        answered = con.sql(
            f"SELECT count(*) FROM '{results}/predictions/cnn-bow/low_resolution.parquet'"
        ).fetchall()[0][0]
        questions = con.sql("SELECT count(*) FROM questions").fetchall()[0][0]
    assert family["family"].to_list() == ["geometric", "resolution"]
    # easy-VQA's 64x64 images stored at 1/2 and 1/8 of each side; the model's processor
    # scaled them up and answered every question at both severities.
    assert low == [(1, 32, 32), (5, 8, 8)] and answered == 2 * questions
    # rotate and the flip are the geometric family; the flip has one severity.
    assert family.filter(family["family"] == "geometric")["n_perturbations"].item() == 2
    assert intervals["perturbation"].to_list() == family["family"].to_list()
    assert intervals["estimate"].to_list() == family["relative_drop"].to_list()
    assert (intervals["low"] <= intervals["estimate"]).all()
    # easy-VQA's questions (shapes and colours) name no side and read no text: the flip
    # changes none, and none leaves the tables (hand-written ones: tests/test_flip.py).
    assert marks == 0 and questions > 0
    report = (tmp_path / "results" / "easy-vqa-geometric" / "report" / "index.html").read_text()
    assert "Per perturbation family: which hurts each model most" in report
    top = family.sort("relative_drop", descending=True)["family"][0]
    assert f"cnn-bow: the {top} perturbations cost the most" in report
