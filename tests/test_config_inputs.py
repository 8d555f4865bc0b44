"""vqarobust.config_inputs and ``vqarobust validate-config``: the inputs a valid config
names that are not on this machine, each with the key that names it (warnings, or an
error with --strict)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from vqarobust.cli import main
from vqarobust.config import validate_config
from vqarobust.config_inputs import missing_inputs
from vqarobust.datasets.miniature import write_mini_vqav2

COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def hub(tmp_path, monkeypatch) -> Path:
    """An empty Hugging Face cache, as huggingface_hub reads it, for this test only."""
    import huggingface_hub.constants as hc

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))
    return cache


def cache_snapshot(hub: Path, repo_id: str, files: tuple[str, ...]) -> None:
    """A snapshot of ``repo_id`` laid out as huggingface_hub writes it."""
    repo = hub / f"models--{repo_id.replace('/', '--')}"
    (repo / "snapshots" / COMMIT).mkdir(parents=True)
    for name in files:
        (repo / "snapshots" / COMMIT / name).write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)


def checkpoint(folder: Path, files: tuple[str, ...] = ("config.json", "model.safetensors")) -> str:
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_text("{}")
    return str(folder)


def study(root: Path, **more) -> dict:
    """A VQAv2 config over files under ``root`` (made or not by the caller): two model
    checkpoints, a local one and a Hub id, and two pool files, one by its official name."""
    config = {
        "dataset": {
            "name": "mine",
            "adapter": "vqav2",
            "questions": str(root / "vqav2" / "questions.json"),
            "annotations": str(root / "vqav2" / "annotations.json"),
            "images": str(root / "vqav2" / "val2014.zip"),
        },
        "corruptions": ["snow"],
        "basic_questions": {
            "rankers": ["bq_cosine"],
            "pool": [],
            "pool_files": [
                str(root / "pool.json"),
                {"vqa": "v1", "folder": str(root / "v1"), "split": "train2014"},
            ],
        },
        "models": {
            "local": {"family": "vqa-classifier", "path_or_id": str(root / "ckpt")},
            "hub": {"family": "blip", "path_or_id": "org/tiny"},
        },
    }
    config.update(more)
    return validate_config(config)


def test_a_config_whose_inputs_are_all_here_misses_none(tmp_path, hub):
    write_mini_vqav2(tmp_path / "vqav2", n_images=2, images="zip")
    checkpoint(tmp_path / "ckpt")
    cache_snapshot(hub, "org/tiny", ("config.json", "model.safetensors"))
    (tmp_path / "pool.json").write_text("{}")
    (tmp_path / "v1").mkdir()
    for name in ("OpenEnded_mscoco_train2014_questions.json", "mscoco_train2014_annotations.json"):
        (tmp_path / "v1" / name).write_text("{}")
    assert missing_inputs(study(tmp_path)) == []


def test_each_missing_input_is_named_by_its_key(tmp_path, hub):
    """Nothing under tmp_path and an empty cache: every input is reported, in config
    order, with the key a user edits; a model that may download its weights is not."""
    config = study(tmp_path, context={"instances": str(tmp_path / "instances.json")})
    config["models"]["fetched"] = {**config["models"]["hub"], "allow_download": True}
    got = [(m.key, m.path) for m in missing_inputs(config)]
    v1 = str(tmp_path / "v1")
    assert got == [
        ("dataset.questions", str(tmp_path / "vqav2" / "questions.json")),
        ("dataset.annotations", str(tmp_path / "vqav2" / "annotations.json")),
        ("dataset.images", str(tmp_path / "vqav2" / "val2014.zip")),
        ("models.local.path_or_id", str(tmp_path / "ckpt")),
        ("models.hub.path_or_id", "org/tiny"),
        ("basic_questions.pool_files[0]", str(tmp_path / "pool.json")),
        ("basic_questions.pool_files[1].folder", f"{v1}/OpenEnded_mscoco_train2014_questions.json"),
        ("basic_questions.pool_files[1].folder", f"{v1}/mscoco_train2014_annotations.json"),
        ("context.instances", str(tmp_path / "instances.json")),
    ]
    hub_record = missing_inputs(config)[4]
    assert str(hub_record) == (
        "models.hub.path_or_id: org/tiny is neither a folder here nor in the local Hugging "
        "Face cache; fetch it with `hf download org/tiny`"
    )
    assert str(missing_inputs(config)[0]).endswith("questions.json does not exist")


def test_a_checkpoint_without_its_config_or_weights_is_missing(tmp_path, hub):
    """A folder that is not a saved checkpoint, one without weight files, and a cached
    snapshot whose download stopped after config.json."""
    write_mini_vqav2(tmp_path / "vqav2", n_images=2, images="zip")
    cache_snapshot(hub, "org/tiny", ("config.json",))
    (tmp_path / "pool.json").write_text("{}")
    config = study(tmp_path)
    config["basic_questions"]["pool_files"] = [str(tmp_path / "pool.json")]
    config["models"]["local"]["path_or_id"] = checkpoint(tmp_path / "a", ("model.safetensors",))
    config["models"]["bare"] = {**config["models"]["local"]}
    config["models"]["bare"]["path_or_id"] = checkpoint(tmp_path / "b", ("config.json",))
    got = [(m.key, m.why) for m in missing_inputs(config)]
    assert got == [
        ("models.local.path_or_id", "holds no config.json (not a saved checkpoint)"),
        (
            "models.hub.path_or_id",
            "is in the Hugging Face cache without weight files; run `hf download org/tiny`",
        ),
        ("models.bare.path_or_id", "holds no weight files (*.safetensors, *.bin)"),
    ]


def test_style_and_lpips_weights_left_out_by_skip_are_still_reported(tmp_path, hub):
    """With missing_weights: skip the run leaves stylize and LPIPS out; validate-config
    still names their files, so that a user sees what the run will lack."""
    write_mini_vqav2(tmp_path / "vqav2", n_images=2, images="zip")
    checkpoint(tmp_path / "ckpt")
    cache_snapshot(hub, "org/tiny", ("config.json", "model.safetensors"))
    (tmp_path / "pool.json").write_text("{}")
    weights, styles = tmp_path / "adain", tmp_path / "styles"
    lpips = {"backbone": str(tmp_path / "alex.pth"), "linear": str(tmp_path / "lin.pth")}
    config = study(
        tmp_path,
        corruptions=["snow", "stylize"],
        stylize={"weights": str(weights), "styles": str(styles)},
        lpips=lpips,
        missing_weights="skip",
    )
    config["basic_questions"]["pool_files"] = [str(tmp_path / "pool.json")]
    assert [(m.key, m.path) for m in missing_inputs(config)] == [
        ("stylize.weights", str(weights / "vgg_normalised.pth")),
        ("stylize.weights", str(weights / "decoder.pth")),
        ("stylize.styles", str(styles)),
        ("lpips.backbone", lpips["backbone"]),
        ("lpips.linear", lpips["linear"]),
    ]


def test_validate_config_names_modern_yamls_missing_inputs_in_a_bare_checkout(
    tmp_path, hub, monkeypatch, capsys
):
    """config/modern.yaml in a checkout without resources/ and an empty cache: its three
    VQAv2 files and its eight checkpoints, each by its key; warnings (exit 0), or an error
    with --strict (exit 1)."""
    from tests.doc_blocks import sandbox

    (tmp_path / "checkout").mkdir()
    monkeypatch.chdir(sandbox(tmp_path / "checkout"))
    repository = yaml.safe_load((REPO / "src/vqarobust/models/repository.yaml").read_text())
    models = yaml.safe_load((REPO / "config" / "modern.yaml").read_text())["models"]
    expected = [
        "dataset.questions: resources/vqav2/v2_OpenEnded_mscoco_val2014_questions.json "
        "does not exist",
        "dataset.annotations: resources/vqav2/v2_mscoco_val2014_annotations.json does not exist",
        "dataset.images: resources/vqav2/val2014.zip does not exist",
    ] + [
        f"models.{name}.path_or_id: {repository[e['from_repository']]['path_or_id']} is "
        "neither a folder here nor in the local Hugging Face cache; fetch it with "
        f"`hf download {repository[e['from_repository']]['path_or_id']}`"
        for name, e in models.items()
    ]
    assert main(["validate-config", "config/modern.yaml"]) == 0
    out = capsys.readouterr()
    assert out.out == "config/modern.yaml: valid (8 models, 14 corruptions)\n"
    assert out.err.splitlines() == [f"warning: {line}" for line in expected] + [
        "config/modern.yaml: 11 inputs missing (warnings; --strict makes them an error)"
    ]
    assert main(["validate-config", "config/modern.yaml", "--strict"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[:-1] == [f"error: {line}" for line in expected]
    assert err[-1] == "config/modern.yaml: 11 inputs missing (an error with --strict)"


def test_validate_config_strict_passes_once_the_inputs_are_here(tmp_path, hub, capsys):
    write_mini_vqav2(tmp_path / "vqav2", n_images=2, images="zip")
    checkpoint(tmp_path / "ckpt")
    config = {
        "dataset": {
            "name": "mine",
            "adapter": "vqav2",
            **{
                k: str(tmp_path / "vqav2" / f)
                for k, f in (
                    ("questions", "questions.json"),
                    ("annotations", "annotations.json"),
                    ("images", "val2014.zip"),
                )
            },
        },
        "corruptions": ["snow"],
        "models": {"local": {"family": "vqa-classifier", "path_or_id": str(tmp_path / "ckpt")}},
    }
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["validate-config", str(path), "--strict"]) == 0
    assert capsys.readouterr().err == ""
