"""config/multimodal.yaml, the multimodal robustness study's protocol: its plan as shipped
(17 image and 16 text perturbations, what cannot run here skipped with the reason) and a
miniature of it end to end (docs/fidelity.md)."""

from __future__ import annotations

import re

import duckdb
import pytest
import yaml

from tests.conftest import REPO
from tests.study_run import run_study

STUDY = REPO / "config" / "multimodal.yaml"
REWRITES = ["formal", "casual", "passive", "active", "back_translation"]


def _checkpoints(workdir):  # noqa: ANN001, ANN202
    (workdir / "checkpoints").symlink_to(REPO / "checkpoints")


def test_the_shipped_config_is_the_papers_protocol():
    config = yaml.safe_load(STUDY.read_text())
    assert len(config["corruptions"]) == 17 and "stylize" in config["corruptions"]
    assert len(config["text"]["perturbations"]) + len(config["text"]["sentence"]) == 16
    assert "word_swap_random" in config["text"]["perturbations"]  # EDA's, not neighbours
    assert config["text"]["word_share"] == [0.05, 0.1, 0.15, 0.2, 0.25]
    assert (config["text"]["char_share"], config["text"]["char_min_length"]) == (0.3, 4)
    assert (config["text"]["min_similarity"], config["text"]["max_tries"]) == (0.9, 100)
    assert config["text"]["on_low_similarity"] == "keep_last"
    assert config["text"]["filter_levels"] == ["word", "sentence"]
    styles = [n for n in REWRITES if n != "back_translation"]
    assert all(config["text"]["sentence"][n]["sampling"] == {"top_k": 50, "top_p": 0.95}
               for n in styles)  # fmt: skip
    assert sorted(config["text"]["sentence"]) == sorted(REWRITES)


def test_its_dag_skips_what_is_absent_and_plans_the_rest(tmp_path):
    """As shipped, here: no AdaIN weights and no rewrite model, so stylize and the five
    rewrites are skipped, each named with its reason; 16 corruptions x 5 severities and
    11 text perturbations run for both models."""
    _checkpoints(tmp_path)
    out = run_study(STUDY, tmp_path, {}, "-n", "--quiet", "rules")
    skipped = dict(re.findall(r"^Skipping (\w+) \(missing_weights: skip\): (.+)$", out, re.M))
    assert sorted(skipped) == sorted(["stylize", *REWRITES])
    assert "stylize.weights: data/adain lacks" in skipped["stylize"]
    assert "prithivida/informal_to_formal_styletransfer is neither" in skipped["formal"]
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    assert {k: counts.get(k, 0) for k in ("corrupt_images", "perturb_questions",
                                          "rewrite_questions", "run_model")} == {
        "corrupt_images": 80, "perturb_questions": 11, "rewrite_questions": 0,
        "run_model": 2}  # fmt: skip


@pytest.mark.workflow
@pytest.mark.slow
def test_a_miniature_runs_end_to_end(tmp_path):
    """Four images, one model, one corruption besides stylize, two character and two word
    edits at severities 1 and 5 (at most 5 draws of the filter; every edit of the
    shipped config is planned by the DAG test above and tested on its own in
    tests/test_text.py), one sampled rewrite with a tiny local T5 (the other four and
    stylize skipped): the skips reach the database, the filter runs on the word level
    and the sampled rewrite only, characters are edited at the paper's share, and MMI has
    both modalities."""
    from tests.tiny_checkpoints import tiny_t5

    _checkpoints(tmp_path)
    config = yaml.safe_load(STUDY.read_text())
    config["dataset"]["n_images"] = 4
    config.update(corruptions=["gaussian_noise", "stylize"], severities=[1, 5])
    config["text"]["perturbations"] = ["keyboard", "char_replace", "synonym_replace",
                                       "word_delete"]  # fmt: skip
    # The paper's 100 draws cost a sampled rewrite one generate call each per question
    # under the threshold; 5 show the filter at work.
    config["text"]["max_tries"] = 5
    config["text"]["sentence"]["formal"].update(model=str(tiny_t5(tmp_path / "t5")),
                                                max_new_tokens=6)  # fmt: skip
    config["models"] = {"cnn-bow": config["models"]["cnn-bow"]}
    miniature = tmp_path / "multimodal-miniature.yaml"
    miniature.write_text(yaml.safe_dump(config))
    out = run_study(miniature, tmp_path, {})
    assert "Skipping casual" in out and "Skipping formal" not in out
    db = tmp_path / "results" / "easy-vqa-multimodal" / "robustness.duckdb"
    with duckdb.connect(str(db), read_only=True) as con:
        skipped = dict(con.sql("SELECT perturbation, reason FROM skipped_perturbations").fetchall())
        assert sorted(skipped) == sorted(["stylize", *REWRITES[1:]])
        assert "is neither a local folder nor in the Hugging Face cache" in skipped["casual"]
        sets = con.sql("SELECT perturbation, severity, original, perturbed, similarity, tries "
                       "FROM question_sets").pl()  # fmt: skip
        mmi = con.sql("SELECT modality FROM mmi WHERE scope = 'all' AND \"group\" = 'all'")
        modalities = {m for (m,) in mmi.fetchall()}
    filtered = set(sets.filter(sets["similarity"].is_not_null())["perturbation"].to_list())
    assert filtered == {"synonym_replace", "word_delete", "formal"}
    # Every filtered question has its tries, and some needed more than one draw.
    tried = sets.filter(sets["similarity"].is_not_null())["tries"]
    assert tried.null_count() == 0 and tried.min() >= 1 and tried.max() > 1
    # char_replace at the paper's share: a touched word of n >= 4 letters has
    # ceil(0.3 n) letters replaced; shorter words are never touched.
    replaced = sets.filter(sets["perturbation"] == "char_replace")
    edits = []
    for a, b in zip(replaced["original"], replaced["perturbed"], strict=True):
        for x, y in zip(a.split(), b.split(), strict=True):
            if x != y:
                assert len(x) >= 4
                edits.append(sum(p != q for p, q in zip(x, y, strict=True)))
    assert edits and max(edits) >= 2
    assert {"image", "text"} <= modalities
