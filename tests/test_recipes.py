"""docs/recipes.md, "Today's VLMs on your own VQAv2": its config
(config/examples/two-vlms.yaml) validates and is config/modern.yaml's image protocol,
its ``hf download`` lines fetch the config's models, its validate-config output is the
command's own, and its 4-GPU command plans on a stand-in of VQAv2."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO
from tests.doc_blocks import blocks, commands, program

RECIPE = REPO / "config" / "examples" / "two-vlms.yaml"
DOC = "docs/recipes.md"


def _blocks(lang: str) -> list[str]:
    return [b.text for b in blocks((DOC,)) if b.lang == lang]


def _empty_cache(tmp_path: Path, monkeypatch) -> None:
    """An empty Hugging Face cache for this test and the processes it starts."""
    import huggingface_hub.constants as hc

    cache = tmp_path / "hub"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hc, "HF_HUB_CACHE", str(cache))


def test_the_recipe_is_modern_yamls_image_protocol_with_a_question_side():
    """Validated, the recipe differs from config/modern.yaml in the keys the doc names
    only: two of its models, the question side, how inference is cut into jobs."""
    from vqarobust.config import validate_config

    recipe = validate_config(yaml.safe_load(RECIPE.read_text()))
    modern = validate_config(yaml.safe_load((REPO / "config" / "modern.yaml").read_text()))
    differ = {k for k in recipe.keys() | modern.keys() if recipe.get(k) != modern.get(k)}
    assert differ == {
        "models",
        "text",
        "basic_questions",
        "inference_jobs",
        "threads",
        "study",
        "dataset",
    }
    assert {**recipe["dataset"], "name": None} == {**modern["dataset"], "name": None}
    assert recipe["models"] == {k: modern["models"][k] for k in ("qwen2.5-vl-3b", "smolvlm-256m")}
    assert recipe["text"]["perturbations"] and recipe["basic_questions"]["rankers"]
    assert recipe["basic_questions"]["pool"] == ["eval"]
    # Four GPU jobs of threads.infer cores each fit the documented --cores 8.
    assert (recipe["inference_jobs"], 4 * recipe["threads"]["infer"]) == ("subset", 8)
    text = (REPO / DOC).read_text()
    for key in [*(differ - {"dataset"}), "dataset.name"]:
        assert f"`{key}`" in text, key


def test_the_hf_download_lines_fetch_the_recipes_models():
    repository = yaml.safe_load((REPO / "src/vqarobust/models/repository.yaml").read_text())
    models = yaml.safe_load(RECIPE.read_text())["models"]
    ids = [repository[e["from_repository"]]["path_or_id"] for e in models.values()]
    fetch = [c for b in _blocks("bash") for c in commands(b) if c[0] == "hf"]
    assert fetch == [["hf", "download", i] for i in ids]


def test_the_recipes_validate_config_output_is_the_commands_own(tmp_path, monkeypatch, capsys):
    """In a checkout without resources/ and with an empty cache, validate-config prints
    the doc's lines: the three VQAv2 files and the two checkpoints, each by its key."""
    from tests.doc_blocks import sandbox
    from vqarobust.cli import main

    _empty_cache(tmp_path, monkeypatch)
    (tmp_path / "checkout").mkdir()
    monkeypatch.chdir(sandbox(tmp_path / "checkout"))
    (shown,) = [b for b in _blocks("text") if b.startswith("$ vqarobust validate-config")]
    command, *lines = shown.splitlines()
    argv = command.removeprefix("$ vqarobust ").split()
    assert main(argv) == 0
    out = capsys.readouterr()
    assert (out.out + out.err).splitlines() == lines
    assert main([*argv, "--strict"]) == 1


@pytest.mark.workflow
def test_the_recipes_commands_plan_on_a_stand_in_of_vqav2(tmp_path, monkeypatch):
    """The doc's 4-GPU command, with the dataset paths pointed at a 3-image miniature of
    VQAv2 and an empty Hugging Face cache (the workflow's start does not need the
    weights), plans the job counts the doc gives, one GPU per inference job."""
    from vqarobust.datasets.miniature import write_mini_vqav2

    _empty_cache(tmp_path, monkeypatch)
    run = [c for b in _blocks("bash") for c in commands(b) if program(c) == "snakemake"]
    local, slurm = run
    assert local[local.index("--configfile") + 1] == "config/examples/two-vlms.yaml"
    assert local[-4:] == ["--cores", "8", "--resources", "gpu=4"]
    site = ["--profile", "profiles/slurm", "--profile", "vqarobust-site"]
    assert slurm == [*local[:-4], *site]

    mini = write_mini_vqav2(tmp_path / "vqav2", n_images=3, images="zip")
    override = tmp_path / "override.yaml"
    override.write_text(yaml.safe_dump({"dataset": {k: str(v) for k, v in mini.items()}}))
    argv = [w if w != "config/examples/two-vlms.yaml" else str(RECIPE) for w in local[1:]]
    at = argv.index("--configfile") + 2
    argv[at:at] = [str(override)]
    cmd = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), "-d", str(tmp_path)]
    proc = subprocess.run([*cmd, *argv, "-n"], capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-5000:]
    stats = out[out.index("Job stats:") :].split("\n\n")[0]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", stats, flags=re.MULTILINE))
    assert counts == {
        "prepare_dataset": "1",
        "corrupt_images": "71",
        "perturb_questions": "4",
        "embed_questions": "1",
        "embed_pool": "1",
        "rank_basic_questions": "2",
        "export_basic_questions": "2",
        "noise_questions": "2",
        "run_model": "44",
        "analyze": "13",
        "load_duckdb": "1",
        "render_report": "1",
        "all": "1",
        "total": "144",
    }
    doc = " ".join((REPO / DOC).read_text().split())
    assert "`snakemake -n` plans 144 jobs (71 `corrupt_images`, 44 `run_model`, 13 `analyze`" in doc
    # Every inference job asks for one GPU: the 44 run_model jobs.
    jobs = re.split(r"\n(?=rule \w+:)", out)
    gpu_jobs = [j for j in jobs if re.search(r"resources: .*\bgpu=1\b", j)]
    assert len(gpu_jobs) == 44 and all(j.startswith("rule run_model:") for j in gpu_jobs)
