"""config/multimodal.yaml, the multimodal robustness study's protocol: its plan as shipped
(17 image and 16 text perturbations, what cannot run here skipped with the reason) and a
miniature of it end to end (docs/fidelity.md)."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import REPO
from tests.study_run import run_study

STUDY = REPO / "config" / "multimodal.yaml"
REWRITES = ["formal", "casual", "passive", "active", "back_translation"]
ENCODER = "sentence-transformers/paraphrase-mpnet-base-v2"


def _checkpoints(workdir):
    (workdir / "checkpoints").symlink_to(REPO / "checkpoints")


def test_the_shipped_config_is_the_papers_protocol():
    config = yaml.safe_load(STUDY.read_text())
    assert len(config["corruptions"]) == 17 and "stylize" in config["corruptions"]
    assert len(config["text"]["perturbations"]) + len(config["text"]["sentence"]) == 16
    assert "word_swap_random" in config["text"]["perturbations"]  # EDA's, not neighbours
    assert config["text"]["word_share"] == [0.05, 0.1, 0.15, 0.2, 0.25]
    assert (config["text"]["char_share"], config["text"]["char_min_length"]) == (0.3, 4)
    # The fidelity filter as the paper's text has it (Sec. 3.2): redrawn up to N_max = 100,
    # then removed; on every level; with paraphrase-mpnet-base-v2.
    assert (config["text"]["min_similarity"], config["text"]["max_tries"]) == (0.9, 100)
    assert config["text"]["on_low_similarity"] == "drop"
    assert config["text"]["filter_levels"] == ["char", "word", "sentence"]
    assert config["text"]["similarity_encoder"] == ENCODER
    # Table 9: SSIM with Wang et al.'s window, and LPIPS's weights named.
    assert config["ssim"] == {"window": "gaussian"}
    assert sorted(config["lpips"]) == ["backbone", "linear"]
    styles = [n for n in REWRITES if n != "back_translation"]
    assert all(
        config["text"]["sentence"][n]["sampling"] == {"top_k": 50, "top_p": 0.95} for n in styles
    )
    assert sorted(config["text"]["sentence"]) == sorted(REWRITES)


def test_its_dag_skips_what_is_absent_and_plans_the_rest(tmp_path):
    """As shipped, here: no AdaIN weights, no rewrite model, no paraphrase-mpnet-base-v2
    and no LPIPS weights, so stylize, the five rewrites and the 11 filtered edits are
    skipped, each named with its reason (the encoder's with the command that fetches it,
    never replaced by another), and LPIPS is off, said so; 16 corruptions x 5 severities
    run for both models. With similarity_encoder: null (the shipped MiniLM, chosen in the
    config) the 11 edits are planned."""
    _checkpoints(tmp_path)
    out = run_study(STUDY, tmp_path, {}, "-n", "--quiet", "rules")
    skipped = dict(re.findall(r"^Skipping (\w+) \(missing_weights: skip\): (.+)$", out, re.M))
    config = yaml.safe_load(STUDY.read_text())
    edits = config["text"]["perturbations"]
    assert sorted(skipped) == sorted(["stylize", *REWRITES, *edits, "LPIPS"])
    assert "stylize.weights: data/adain lacks" in skipped["stylize"]
    assert "prithivida/informal_to_formal_styletransfer is neither" in skipped["formal"]
    for name in edits:
        assert skipped[name].startswith(f"text.similarity_encoder: {ENCODER} is neither")
        assert f"`hf download {ENCODER}`" in skipped[name]
    assert skipped["LPIPS"].startswith("lpips.backbone: no file data/lpips/alexnet")
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    jobs = ("corrupt_images", "perturb_questions", "rewrite_questions", "score_lpips", "run_model")
    assert {k: counts.get(k, 0) for k in jobs} == {
        "corrupt_images": 80,
        "perturb_questions": 0,
        "rewrite_questions": 0,
        "score_lpips": 0,
        "run_model": 2,
    }
    out = run_study(
        STUDY, tmp_path, {"text": {"similarity_encoder": None}}, "-n", "--quiet", "rules"
    )
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    assert counts["perturb_questions"] == 11
    assert not re.search(r"^Skipping keyboard", out, re.M)


def test_with_missing_weights_fail_the_absent_encoder_stops_the_run_at_start():
    from vqarobust.config import ConfigError, validate_config

    config = yaml.safe_load(STUDY.read_text())
    config.update(missing_weights="fail", corruptions=["gaussian_noise"], lpips={})
    config["text"]["sentence"] = {}
    with pytest.raises(
        ConfigError,
        match=rf"text.similarity_encoder: {ENCODER} is neither.*"
        rf"`hf download {ENCODER}`.*similarity_encoder: null",
    ):
        validate_config(config)
    # Without a level the filter applies to, the encoder is not needed.
    config["text"]["filter_levels"] = []
    validate_config(config)


def _random_lpips(folder):
    """A random-init AlexNet in torchvision's layout and the lpips wheel's linear layers:
    LPIPS's files as the config names them (the real backbone cannot be fetched here)."""
    import lpips
    import torch

    from vqarobust.corruptions.lpips import alexnet_features

    folder.mkdir()
    torch.manual_seed(0)
    state = {f"features.{k}": v for k, v in alexnet_features().state_dict().items()}
    torch.save(state, folder / "alexnet.pth")
    return folder / "alexnet.pth", Path(lpips.__file__).parent / "weights" / "v0.1" / "alex.pth"


@pytest.mark.workflow
@pytest.mark.slow
def test_a_miniature_runs_end_to_end(tmp_path):
    """Four images, one model, one corruption besides stylize, one character and two word
    edits at severity 1 (every edit of the shipped config is planned by the DAG test
    above and tested on its own in tests/test_text.py), the shipped filter (0.9, 100
    draws, drop, every level) with the shipped MiniLM in place of
    paraphrase-mpnet-base-v2 (not here; chosen in the config, as the skip message says),
    and LPIPS on a random AlexNet: the skips reach the database; each question under 0.9
    after 100 draws is removed and no kept one is under 0.9; characters are edited at the
    paper's share; MMI has both modalities; image quality has SSIM and LPIPS.

    A removed question leaves every table (docs/text.md), so the miniature keeps to edits
    that leave questions: under MiniLM, char_replace removes 20 of these 37 questions at
    severity 1 (17 are left) and 31 at severity 5, and a tiny random T5's rewrites all
    of them (the sentence level's removal is tested in tests/test_sentence.py)."""
    _checkpoints(tmp_path)
    config = yaml.safe_load(STUDY.read_text())
    config["dataset"]["n_images"] = 4
    config.update(corruptions=["gaussian_noise", "stylize"], severities=[1])
    config["text"]["perturbations"] = ["char_replace", "word_delete", "punct_insert"]
    config["text"]["similarity_encoder"] = None
    backbone, linear = _random_lpips(tmp_path / "lpips")
    config["lpips"] = {"backbone": str(backbone), "linear": str(linear)}
    config["models"] = {"cnn-bow": config["models"]["cnn-bow"]}
    miniature = tmp_path / "multimodal-miniature.yaml"
    miniature.write_text(yaml.safe_dump(config))
    # The database is what this test reads: its target, not the report's.
    database = Path("results", "easy-vqa-multimodal", "robustness.duckdb")
    out = run_study(miniature, tmp_path, {}, str(database))
    assert "Skipping char_replace" not in out and "Skipping LPIPS" not in out
    db = tmp_path / database
    with duckdb.connect(str(db), read_only=True) as con:
        skipped = dict(con.sql("SELECT perturbation, reason FROM skipped_perturbations").fetchall())
        assert sorted(skipped) == sorted(["stylize", *REWRITES])
        assert "is neither a local folder nor in the Hugging Face cache" in skipped["casual"]
        sets = con.sql(
            "SELECT perturbation, severity, original, perturbed, similarity, tries "
            "FROM question_sets"
        ).pl()
        mmi = con.sql("SELECT modality FROM mmi WHERE scope = 'all' AND \"group\" = 'all'")
        modalities = {m for (m,) in mmi.fetchall()}
        quality = con.sql(
            "SELECT ssim_mean, lpips_mean FROM image_quality WHERE perturbation = 'gaussian_noise'"
        ).fetchall()
    # Every text perturbation is under the filter, on both levels.
    assert sets["similarity"].null_count() == 0 and sets["tries"].null_count() == 0
    assert set(sets["perturbation"]) == {"char_replace", "word_delete", "punct_insert"}
    # A question under 0.9 after 100 draws is removed; none kept is under 0.9.
    dropped = sets.filter(sets["perturbed"].is_null())
    kept = sets.filter(sets["perturbed"].is_not_null())
    assert (dropped["tries"] == 100).all() and (dropped["similarity"] < 0.9).all()
    assert (kept["similarity"] >= 0.9).all() and (kept["tries"] <= 100).all()
    assert dropped.height and kept.height and kept["tries"].max() > 1
    # char_replace at the paper's share: a touched word of n >= 4 letters has
    # ceil(0.3 n) letters replaced; shorter words are never touched.
    replaced = kept.filter(kept["perturbation"] == "char_replace")
    edits = []
    for a, b in zip(replaced["original"], replaced["perturbed"], strict=True):
        for x, y in zip(a.split(), b.split(), strict=True):
            if x != y:
                assert len(x) >= 4
                edits.append(sum(p != q for p, q in zip(x, y, strict=True)))
    assert edits and max(edits) >= 2
    assert {"image", "text"} <= modalities
    assert len(quality) == 1 and all(s < 1 and lp > 0 for s, lp in quality)
