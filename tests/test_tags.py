"""Tags, not names: what is special about a perturbation (stylize's AdaIN weights and
style images, grayscale kept out of VRE and read by the colour-bias tables, the box-aware
corruptions' object boxes) is a registry tag, and the workflow queries the tag. So no
module outside a perturbation's own file and the registries spells its name, and a
plugin corruption with the tag is planned as the built-in one."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest

from tests.conftest import REPO
from tests.tiny_checkpoints import style_images, tiny_adain
from vqarobust import corruptions
from vqarobust.analyses.colour_bias import decolouring
from vqarobust.config import ConfigError, validate_config
from vqarobust.corruptions import COLOUR_BIAS, CORRUPTIONS, STYLE_WEIGHTS
from vqarobust.materialize.images import corrupt_subset
from vqarobust.perturbations import PERTURBATIONS
from vqarobust.plan import StudyPlan
from vqarobust.store import ImageShards

SRC = REPO / "src" / "vqarobust"
NAMES = ("stylize", "grayscale", "object_crop", "occlude_context")
# Where the names may be spelt: each perturbation's own file and the registries.
OWN_FILES = {
    "corruptions/stylize.py",
    "corruptions/colour.py",
    "corruptions/geometric.py",
    "corruptions/occlusion.py",
    "corruptions/registry.py",
    "registry.py",
    "perturbations.py",
}
# Strings equal to a name that are not the perturbation: one named constant each, the
# only place it is spelt; readers use the constant.
NAMED_ELSEWHERE = {
    ("config_keys.py", "STYLIZE"): "the config block's user-facing key",
    ("metrics/colour_bias.py", "DECOLOURED_ANSWER"): "a column of colour_bias_examples",
}


def _python_files() -> list[tuple[str, Path]]:
    package = [(p.relative_to(SRC).as_posix(), p) for p in sorted(SRC.rglob("*.py"))]
    scripts = sorted((REPO / "workflow" / "scripts").glob("*.py"))
    return package + [(p.relative_to(REPO).as_posix(), p) for p in scripts]


def name_literals(where: str, source: str) -> list[str]:
    """``file:line: 'name'`` for each string literal equal to a perturbation name that is
    not the value of the file's allowed named constant."""
    tree = ast.parse(source)
    allowed = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and (where, t.id) in NAMED_ELSEWHERE for t in node.targets)
    }
    return [
        f"{where}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in NAMES and id(node) not in allowed
    ]


def test_no_module_outside_its_own_file_spells_a_special_perturbations_name():
    found = [
        hit
        for where, path in _python_files()
        if where not in OWN_FILES
        for hit in name_literals(where, path.read_text())
    ]
    rules = [REPO / "Snakefile", *sorted((REPO / "rules").glob("*.smk"))]
    quoted = re.compile("[\"'](" + "|".join(NAMES) + ")[\"']")
    found += [
        f"{path.name}:{i}: {m.group(0)}"
        for path in rules
        for i, line in enumerate(path.read_text().splitlines(), 1)
        if (m := quoted.search(line))
    ]
    assert not found, "query a registry tag instead:\n" + "\n".join(found)


def test_each_allowed_constant_is_there_and_the_check_catches_a_name():
    for (where, constant), _why in NAMED_ELSEWHERE.items():
        tree = ast.parse((SRC / where).read_text())
        values = [
            n.value.value
            for n in ast.walk(tree)
            if isinstance(n, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == constant for t in n.targets)
        ]
        assert values and values[0] in NAMES, (where, constant)
    # The same string in a comparison, or under another constant's name, is caught.
    assert name_literals("plan/x.py", 'if name == "stylize":\n    pass\n') == [
        "plan/x.py:1: 'stylize'"
    ]
    assert name_literals("config_keys.py", 'OTHER = "grayscale"\n') == [
        "config_keys.py:1: 'grayscale'"
    ]
    assert name_literals("config_keys.py", 'STYLIZE = "stylize"\n') == []


def test_the_built_ins_carry_the_tags():
    assert corruptions.needs("stylize") == STYLE_WEIGHTS
    assert CORRUPTIONS.list(needs=STYLE_WEIGHTS) == ["stylize"]
    assert CORRUPTIONS.list(outside_vre=True) == ["grayscale"]
    assert CORRUPTIONS.list(diagnostic=COLOUR_BIAS) == ["grayscale"]
    assert CORRUPTIONS.list(needs="boxes") == ["object_crop", "occlude_context"]
    assert corruptions.names(family="control") == ["blank"]
    # An unknown name has none of them (the CLI and the report ask about any name).
    assert not corruptions.needs_style_weights("nope") and not corruptions.outside_vre("nope")
    assert corruptions.diagnostic("nope") is None


@pytest.fixture
def registry(monkeypatch):
    """The perturbation registry, restored after the test: a plugin registered in it
    does not outlive the test."""
    monkeypatch.setattr(PERTURBATIONS, "_entries", dict(PERTURBATIONS._entries))
    return CORRUPTIONS


def _config(names: list[str], **extra: object) -> dict:
    return {
        "dataset": {"name": "d", "adapter": "easy-vqa"},
        "corruptions": names,
        "severities": [1],
        "models": {"m": {"family": "blip", "path_or_id": "x/y"}},
        **extra,
    }


def test_a_plugin_that_needs_the_style_weights_is_planned_as_stylize(
    registry, tmp_path, easy_vqa_eval
):
    @registry.register(family="painting", severities=1, needs=STYLE_WEIGHTS)
    def oil_paint(image, severity, rng, stylizer=None):
        return stylizer(image, 5, rng)

    # Without the weights, the run stops at start with stylize's message, naming it.
    with pytest.raises(ConfigError) as builtin:
        validate_config(_config(["stylize"]))
    with pytest.raises(ConfigError) as plugin:
        validate_config(_config(["oil_paint"]))
    assert str(plugin.value) == str(builtin.value).replace("'stylize'", "'oil_paint'")
    assert str(plugin.value).startswith("config error at stylize: corruption 'oil_paint' needs")
    # missing_weights: skip leaves both out, with the same reason.
    skipped = StudyPlan.build(
        validate_config(_config(["snow", "stylize", "oil_paint"], missing_weights="skip"))
    )
    assert skipped.corruptions == ["snow"]
    reasons = skipped.skipped_weights
    assert reasons["oil_paint"] == reasons["stylize"].replace("'stylize'", "'oil_paint'")

    block = {
        "weights": str(tiny_adain(tmp_path / "w")),
        "styles": str(style_images(tmp_path / "s")),
        "style_size": 64,
    }
    plan = StudyPlan.build(validate_config(_config(["stylize", "oil_paint"], stylize=block)))
    stage = plan.corrupt
    ours, theirs = SimpleNamespace(corruption="oil_paint"), SimpleNamespace(corruption="stylize")
    assert stage.corrupt_input(ours) == stage.corrupt_input(theirs)
    assert set(stage.corrupt_input(ours)) == {"images", "weights", "styles"}
    assert stage.stylize_params(ours) == stage.stylize_params(theirs) == {"style_size": 64}
    assert stage.stylize_params(SimpleNamespace(corruption="snow")) == {}

    # Its job builds the Stylizer from the block's files and passes it in.
    out = tmp_path / "oil_paint"
    options = {"weights": block["weights"], "styles": block["styles"], "style_size": 64}
    corrupt_subset(easy_vqa_eval["images"], out, "oil_paint", 1, options=options)
    clean, painted = ImageShards(easy_vqa_eval["images"]), ImageShards(out)
    assert painted.ids() == clean.ids()
    before, after = clean.read(clean.ids()), painted.read(clean.ids())
    assert all(before[i] != after[i] for i in clean.ids())


def test_a_plugin_with_the_colour_bias_tags_is_kept_out_and_read_as_grayscale(registry):
    @registry.register(family="colour", severities=1, outside_vre=True, diagnostic=COLOUR_BIAS)
    def desaturate(image, severity, rng):
        return np.repeat(image.mean(axis=2, keepdims=True).astype(np.uint8), 3, axis=2)

    config = validate_config(_config(["snow", "desaturate"]))
    assert StudyPlan.build(config).analyze.outside_metrics(None) == ["desaturate"]
    config = validate_config(_config(["snow", "grayscale", "desaturate"]))
    assert StudyPlan.build(config).analyze.outside_metrics(None) == ["grayscale", "desaturate"]
    config = validate_config(_config(["desaturate"], vre={"include_grayscale": True}))
    assert StudyPlan.build(config).analyze.outside_metrics(None) == []

    def scored(*names: str) -> pl.DataFrame:
        return pl.DataFrame(
            {"modality": ["clean", *["image"] * len(names)], "perturbation": ["clean", *names]}
        )

    # The colour-bias tables read the tagged perturbation that ran, grayscale or not.
    assert decolouring(scored("snow", "desaturate")) == "desaturate"
    assert decolouring(scored("snow", "grayscale")) == "grayscale"
    assert decolouring(scored("snow")) is None


def test_the_control_without_the_image_is_found_by_its_tag():
    from vqarobust.corruptions import image_removing_controls, removes_image

    assert image_removing_controls() == ["blank"]
    assert not removes_image("snow") and not removes_image("no-such-corruption")
