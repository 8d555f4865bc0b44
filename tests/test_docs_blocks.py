"""The docs as tests: every YAML, shell and Python block of the README, docs/*.md and
config/README.md is validated, run or names the test that runs it (tests/doc_blocks.py
says how a block is marked). The shell blocks that read a finished run's database run in
tests/test_workflow.py, on its tiny run."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.conftest import REPO
from tests.doc_blocks import CHECKED, MARKS, blocks, checked, commands, merge, run_commands, sandbox

# What these tests check, so that a block that loses its mark (or a new, unmarked one) is
# noticed: the count is the docs' own, asserted below.
N_BLOCKS = 41


def _needs_a_run(text: str) -> bool:
    return "results/" in text


def test_every_code_block_says_how_it_is_checked():
    found = [b for b in blocks() if b.lang in CHECKED]
    assert len(found) == N_BLOCKS, [b.where for b in found]
    wrong = []
    for b in found:
        unknown = b.marks.keys() - MARKS
        how = b.marks.keys() & {"config", "over", "run", "covered-by", "needs"}
        if unknown or not how:
            wrong.append(f"{b.where}: marks {sorted(b.marks)} (known: {sorted(MARKS)})")
        if b.lang == "yaml" and not b.marks.keys() & {"config", "over"}:
            wrong.append(f"{b.where}: a YAML block is a config or a fragment over one")
        covering = [REPO / t for t in b.marks.get("covered-by", "").split(",") if t]
        for path in covering:
            if not path.exists():
                wrong.append(
                    f"{b.where}: covered-by {path.relative_to(REPO)}, which does not exist"
                )
        words = [w for argv in commands(b.text) for w in argv] if b.lang == "bash" else []
        for word in words if covering else []:
            # The study config it names is one that a covering test runs.
            if word.startswith("config/") and not any(
                p.exists() and Path(word).name in p.read_text() for p in covering
            ):
                wrong.append(f"{b.where}: no covering test runs {word}")
        if "needs" in b.marks and b.marks["needs"] not in " ".join(
            (REPO / b.doc).read_text().split()
        ).replace("`", ""):
            wrong.append(f"{b.where}: needs={b.marks['needs']} is not said in the doc")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("block", checked("yaml"), ids=lambda b: b.where)
def test_yaml_block_is_a_valid_config_as_the_docs_layer_it(block):
    from vqarobust.config import validate_config

    fragment = yaml.safe_load(block.text)
    if "config" in block.marks:
        config = fragment
    else:
        base = yaml.safe_load((REPO / block.marks["over"]).read_text())
        config = merge(base, fragment)
    validate_config(copy.deepcopy(config))


def _given() -> dict[str, object]:
    """What a ``python run given=...`` block uses without defining it."""
    rng = np.random.default_rng(0)
    return {
        "image": rng.integers(0, 256, (64, 64, 3), dtype=np.uint8),
        "pool": [
            f"{w} {what} the {shape}?"
            for w in ("what", "which")
            for what in ("color is", "size is")
            for shape in ("circle", "square", "triangle", "shape", "rectangle", "star")
        ],
    }


@pytest.mark.parametrize("block", checked("python"), ids=lambda b: b.where)
def test_python_block_runs(block):
    given = _given()
    names = {k: given[k] for k in block.marks.get("given", "").split(",") if k}
    exec(compile(block.text, block.where, "exec"), names)  # the doc's own code


@pytest.mark.workflow
@pytest.mark.parametrize(
    "block", [b for b in checked("bash") if not _needs_a_run(b.text)], ids=lambda b: b.where
)
def test_shell_block_plans_and_runs_from_a_checkout(block, tmp_path):
    done = run_commands(block.text, sandbox(tmp_path))
    assert done, f"{block.where}: nothing ran"


@pytest.mark.workflow
def test_the_documented_model_loads_are_the_default_plan(tmp_path):
    """docs/models.md's count of model loads and run_model jobs in the default config is
    what Snakemake plans for it."""
    from tests.plans import plan

    n_models = len(yaml.safe_load((REPO / "config" / "config.yaml").read_text())["models"])
    jobs = plan(sandbox(tmp_path))["run_model"]
    text = " ".join((REPO / "docs" / "models.md").read_text().split())
    assert f"**{jobs // n_models}** in the default config" in text
    assert f"{jobs} `run_model` jobs for its {n_models} models" in text


def _recipes() -> list[tuple[str, dict]]:
    """docs/configuration.md's "Common tasks" rows that are a setting to write: a
    ``--config 'key=value'`` or a ``key: value`` mapping, as the fragment each gives."""
    text = (REPO / "docs" / "configuration.md").read_text()
    table = text[text.index("## Common tasks") : text.index("## What reruns")]
    found = []
    for task, how in re.findall(r"^\| ([^|]+) \| ([^|]+) \|$", table, flags=re.M):
        if task == "task":
            continue
        for snippet in re.findall(r"`([^`]+)`", how):
            # A model entry's key goes into an entry of a checkpoint from the repository.
            snippet = snippet.replace("<name>", "vilt-vqa")
            if snippet.startswith("--config '"):
                key, _, value = snippet.removeprefix("--config '").rstrip("'").partition("=")
                found.append((task, {key: yaml.safe_load(value)}))
            elif re.match(r"^[a-z_.]+: ", snippet):
                key, _, value = snippet.partition(": ")
                fragment = yaml.safe_load(value)
                for part in reversed(key.split(".")):
                    fragment = {part: fragment}
                if "entry" in how:
                    entry = {"from_repository": "vilt-vqa", **fragment}
                    fragment = {"models": {"checkpoint": entry}}
                found.append((task, fragment))
    return found


@pytest.mark.parametrize("task, fragment", _recipes(), ids=lambda x: str(x)[:40])
def test_every_common_task_recipe_validates_or_names_what_is_missing(task, fragment):
    """Each recipe merged over the default either validates or fails with a config error
    that names a key (a dataset adapter needs its own source files); never another
    exception, which a user would meet as a traceback."""
    from vqarobust.config import ConfigError, validate_config

    config = merge(yaml.safe_load((REPO / "config" / "config.yaml").read_text()), fragment)
    try:
        validate_config(config)
    except ConfigError as exc:
        assert str(exc).startswith("config error at "), exc
        assert task.startswith("VQAv2") or "manifest" in task, f"{task}: {exc}"


def test_the_common_tasks_are_all_swept():
    assert len(_recipes()) == 9
