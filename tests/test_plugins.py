"""Plugins (docs/extending.md): the example package installed for real (its wheel built
and installed into a folder on PYTHONPATH) and run end to end through Snakemake with a
study-local module beside it; an edit to its corruption reruns exactly its jobs and
their dependents; bad plugins stop the run at start with one exact line. Registries are
process-wide, so every case loads its plugins in a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
import yaml

from tests.conftest import REPO
from tests.plans import planned_jobs
from tests.plugin_example import EXAMPLE, colour_bag_checkpoint

TINT = '''"""A study's own corruption, not installed: a colour tint (one severity)."""

import numpy as np

from vqarobust.corruptions import CORRUPTIONS


@CORRUPTIONS.register(family="colour", severities=1)
def local_tint(image, severity, rng):
    out = image.astype(np.int16) + np.array([30, 0, -30])
    return np.clip(out, 0, 255).astype(np.uint8)
'''


def _env(*paths: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*map(str, paths), env.get("PYTHONPATH", "")])
    return env


def _run(args: list[str], cwd: Path, env: dict[str, str], timeout: int = 600):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def _snakemake(workdir: Path, env: dict[str, str], *args: str):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *args,
    ]
    return _run(cmd, workdir, env)


def _install_example(target: Path) -> None:
    """pip builds the example's wheel (setuptools, offline) from a copy of it (a build
    writes into the source folder) and installs it into ``target``: its modules and its
    dist-info with the entry points."""
    import shutil

    source = target.parent / "example-source"
    shutil.copytree(EXAMPLE, source, ignore=shutil.ignore_patterns("build", "*.egg-info"))
    proc = _run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--target",
            str(target),
            str(source),
        ],
        REPO,
        dict(os.environ),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (target / "vqarobust_example" / "corruptions.py").is_file()


def _config() -> dict:
    return {
        "seed": 0,
        "dataset": {"name": "easy-vqa", "adapter": "easy-vqa", "n_images": 4},
        "plugins": ["studyplugins.tint"],
        "corruptions": ["vignette", "local_tint"],
        "controls": [],
        "severities": [1, 2],
        "text": {"perturbations": ["shout"]},
        "basic_questions": {"rankers": []},
        "threads": {"infer": 1},
        "uncertainty": {"resamples": 20},
        "models": {
            "colour-bag": {
                "family": "example-colour-bag",
                "path_or_id": "models/colour-bag",
                "batch_size": 4,
                "device": "cpu",
            }
        },
    }


@pytest.mark.workflow
@pytest.mark.slow
def test_the_example_plugin_runs_end_to_end_and_reruns_only_its_jobs(tmp_path):
    site = tmp_path / "site"
    _install_example(site)
    env = _env(site)
    work = tmp_path / "work"
    (work / "config").mkdir(parents=True)
    (work / "studyplugins").mkdir()
    (work / "studyplugins" / "__init__.py").write_text("")
    (work / "studyplugins" / "tint.py").write_text(TINT)
    colour_bag_checkpoint(work / "models" / "colour-bag")
    (work / "config" / "config.yaml").write_text(yaml.safe_dump(_config()))

    listing = _run(
        [sys.executable, "-m", "vqarobust.cli", "corruptions", "--family", "lens"], work, env
    )
    assert listing.stdout.splitlines()[1].split() == [
        "vignette",
        "lens",
        "1..5",
        "vignette",
        "(package",
        "vqarobust-example-plugin",
        "0.1.0)",
    ]
    proc = _snakemake(work, env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    results = work / "results" / "easy-vqa"
    # Its subsets materialized, the study's own corruption's too (one severity).
    for name, levels in (("vignette", ["1", "2"]), ("local_tint", ["1"])):
        assert sorted(p.name for p in (results / "images" / name).iterdir()) == levels
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        asked = con.sql(
            "SELECT DISTINCT perturbation FROM predictions WHERE model = 'colour-bag' ORDER BY 1"
        ).fetchall()
        changes = con.sql(
            "SELECT perturbation, severity, n, changed, share FROM answer_changes ORDER BY ALL"
        ).fetchall()
        families = dict(con.sql("SELECT perturbation, family FROM vre_perturbation").fetchall())
        plugins_info = json.loads(
            con.execute("SELECT value FROM run_info WHERE key = 'provenance.plugins'").fetchone()[0]
        )
    assert [p for (p,) in asked] == ["clean", "local_tint", "shout", "vignette"]
    # Its analysis: every perturbed subset of the model, the share its own arithmetic.
    assert {(p, s) for p, s, *_ in changes} == {
        ("vignette", 1),
        ("vignette", 2),
        ("local_tint", 1),
        ("shout", 1),
        ("shout", 2),
    }
    assert all(share == changed / n for *_, n, changed, share in changes)
    assert families["vignette"] == "lens" and families["local_tint"] == "colour"
    assert {p["module"] for p in plugins_info} >= {
        "vqarobust_example.corruptions",
        "studyplugins.tint",
    }
    html = (results / "report" / "index.html").read_text()
    assert '<section id="plugins"><h2>Plugin analyses</h2>' in html
    assert 'id="plugin-answer_changes"' in html

    # An edit to the example's corruption reruns its subsets, the model's job (which
    # answers its other subsets from their chunks), what reads them, and nothing else.
    source = site / "vqarobust_example" / "corruptions.py"
    source.write_text(source.read_text().replace("0.8)", "0.9)"))
    dry = _snakemake(work, env, "-n")
    assert dry.returncode == 0, dry.stdout + dry.stderr
    planned = planned_jobs(dry.stdout)
    assert planned["corrupt_images"] == 2 and planned["run_model"] == 1
    assert "prepare_dataset" not in planned and "perturb_questions" not in planned
    jobs = dry.stdout.split("rule ")
    corrupted = {
        j.split("corruption=")[1].split(",")[0] for j in jobs if j.startswith("corrupt_images:")
    }
    assert corrupted == {"vignette"}
    assert {"analyze:scoring", "analyze:answer_changes", "analyze:image_quality"} <= set(planned)


BAD = {
    "import_error": ("broken", "import numpyy\n"),
    "clash_with_builtin": (
        "clash",
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(family='weather')\n"
        "def snow(image, severity, rng):\n    return image\n",
    ),
    "float_output": (
        "floaty",
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(family='odd')\n"
        "def floaty(image, severity, rng):\n"
        "    return image / 255.0\n",
    ),
    "smaller_output": (
        "shrink",
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(family='odd')\n"
        "def shrink(image, severity, rng):\n"
        "    return image[1:].copy()\n",
    ),
    "global_random": (
        "noisy",
        "import numpy as np\n"
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(family='odd')\n"
        "def noisy(image, severity, rng):\n"
        "    return (image ^ np.random.randint(0, 2, image.shape))"
        ".astype(np.uint8)\n",
    ),
    "unknown_needs": (
        "needy",
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(family='odd', needs='depth maps')\n"
        "def needy(image, severity, rng, depth):\n    return image\n",
    ),
    "foreign_option": (
        "optioned",
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(family='odd', options=('gamma',))\n"
        "def optioned(image, severity, rng, gamma=1.0):\n"
        "    return image\n",
    ),
}
MESSAGES = {
    "import_error": "plugin module broken (config plugins): cannot import broken: "
    "ModuleNotFoundError: No module named 'numpyy'",
    "clash_with_builtin": "plugin module clash (config plugins): perturbation 'snow' of module "
    "clash clashes with the one of built-in (vqarobust.corruptions.weather)",
    "float_output": "config error at corruptions[0]: corruption 'floaty' of module floaty "
    "(config plugins) is refused: severity 1 on a 48x64 sample image: "
    "RuntimeError: floaty severity 1 returned float64 (48, 64, 3), not uint8 "
    "(48, 64, 3)",
    "smaller_output": "config error at corruptions[0]: corruption 'shrink' of module shrink "
    "(config plugins) is refused: severity 1 on a 48x64 sample image: "
    "RuntimeError: shrink severity 1 returned uint8 (47, 64, 3), not uint8 "
    "(48, 64, 3)",
    "global_random": "config error at corruptions[0]: corruption 'noisy' of module noisy "
    "(config plugins) is refused: severity 1 gave other pixels for the same "
    "seed: it must draw only from the rng it is given",
    "unknown_needs": "config error at corruptions[0]: corruption 'needy' of module needy "
    "(config plugins) needs 'depth maps', which the workflow cannot give a "
    "plugin corruption (only 'boxes' or vqarobust.corruptions.STYLE_WEIGHTS)",
    "foreign_option": "config error at corruptions[0]: corruption 'optioned' of module "
    "optioned (config plugins) takes options ['gamma'], which are not keys "
    "of the config's geometric section (['border', 'flip_questions'])",
}


def _study(folder: Path, plugins: list[str], corruptions: list[str]) -> Path:
    config = {
        "dataset": {"name": "d", "adapter": "easy-vqa"},
        "plugins": plugins,
        "corruptions": corruptions,
        "models": {"m": {"family": "blip", "path_or_id": "x"}},
    }
    path = folder / "study.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


# Runs each case's validate-config in a child forked from one process that imported the
# command once (the children's registries are their own): a process per case costs ~2 s.
_FORKED_CASES = """
import contextlib, io, json, os, sys
from vqarobust.cli import main
out = {}
for case, folder in json.loads(sys.argv[1]).items():
    read, write = os.pipe()
    if os.fork() == 0:
        try:
            os.close(read)
            os.chdir(folder)
            sys.path.insert(0, folder)
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                code = main(["validate-config", os.path.join(folder, "study.yaml")])
            os.write(write, json.dumps([code, err.getvalue()]).encode())
        except BaseException as exc:
            os.write(write, json.dumps([-1, repr(exc)]).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        out[case] = json.loads(pipe.read())
    os.wait()
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def refusals(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list]:
    """Per bad case: validate-config's exit status and standard error."""
    folders = {}
    for case, (module, source) in BAD.items():
        folder = tmp_path_factory.mktemp(case)
        (folder / f"{module}.py").write_text(source)
        listed = [] if case in ("import_error", "clash_with_builtin") else [module]
        _study(folder, [module], listed)
        folders[case] = str(folder)
    proc = _run([sys.executable, "-c", _FORKED_CASES, json.dumps(folders)], REPO, _env())
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_plugin_is_refused_with_one_line(case, refusals):
    code, stderr = refusals[case]
    assert code == 2
    assert stderr.strip().splitlines()[-1] == MESSAGES[case]


def _distribution(site: Path, name: str, entry_points: str) -> None:
    """An installed distribution as importlib.metadata finds it: a dist-info folder."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)


def test_two_plugins_with_one_name_are_refused_naming_both(tmp_path):
    site = tmp_path / "site"
    _distribution(site, "first-dist", "[vqarobust.corruptions]\nfizz = first_mod\n")
    registering = (
        "from vqarobust.corruptions import CORRUPTIONS\n\n"
        "@CORRUPTIONS.register(name='fizz', family='odd')\n"
        "def fizz_{n}(image, severity, rng):\n    return image\n"
    )
    (site / "first_mod.py").write_text(registering.format(n=1))
    (tmp_path / "second_mod.py").write_text(registering.format(n=2))
    study = _study(tmp_path, ["second_mod"], [])
    proc = _run(
        [sys.executable, "-m", "vqarobust.cli", "validate-config", str(study)], tmp_path, _env(site)
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "plugin module second_mod (config plugins): perturbation 'fizz' of module second_mod "
        "clashes with the one of module first_mod"
    )
    listing = _run(
        [sys.executable, "-m", "vqarobust.cli", "corruptions", "--family", "odd"],
        tmp_path,
        _env(site),
    )
    assert listing.stdout.splitlines()[1].split() == [
        "fizz",
        "odd",
        "1..5",
        "fizz",
        "(package",
        "first-dist",
        "1.0)",
    ]


def test_an_entry_point_that_fails_stops_the_workflow_at_start(tmp_path):
    site = tmp_path / "site"
    _distribution(site, "bad-dist", "[vqarobust.analyses]\nbad = bad_analysis\n")
    (site / "bad_analysis.py").write_text("raise RuntimeError('no tables today')\n")
    (tmp_path / "config").mkdir()
    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    (tmp_path / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    proc = _snakemake(tmp_path, _env(site), "-n")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == (
        "plugin bad (package bad-dist 1.0): cannot import bad_analysis: RuntimeError: no "
        "tables today"
    )
    assert not (tmp_path / "results").exists()


def test_every_registry_lists_where_its_names_come_from(tmp_path):
    (tmp_path / "local_family.py").write_text(
        "from vqarobust.models import FAMILIES\n\n"
        "@FAMILIES.register('local-family')\n"
        "def make(**kwargs):\n    raise NotImplementedError\n"
    )
    out = {}
    for command in ("text-perturbations", "rankers", "families", "analyses"):
        proc = _run(
            [sys.executable, "-m", "vqarobust.cli", command, "--plugin", "local_family"],
            tmp_path,
            _env(),
        )
        assert proc.returncode == 0, proc.stderr
        out[command] = proc.stdout.splitlines()
    assert out["text-perturbations"][0].split() == ["name", "level", "needs", "from"]
    assert any(line.split()[:2] == ["keyboard", "char"] for line in out["text-perturbations"])
    assert any(line.split()[:2] == ["bq_lasso", "lasso"] for line in out["rankers"])
    families = {line.split()[0]: line for line in out["families"][1:]}
    assert families["blip"].endswith("built-in")
    assert families["local-family"].endswith("module local_family (config plugins)")
    assert [line.split()[0] for line in out["analyses"][1:3]] == ["scoring", "accuracy"]


def test_a_plugin_digest_follows_relative_imports_and_the_package(tmp_path, monkeypatch):
    """source_digest reads ``from .helpers import`` (an edit there changes it);
    module_digest adds the package modules the plugin imports."""
    from vqarobust import code_digest, plugins

    package = tmp_path / "relplugin"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("SCALE = 2\n")
    (package / "family.py").write_text(
        "from vqarobust.models.base import VQAModel\nfrom .helpers import SCALE\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    before = plugins.source_digest("relplugin.family")
    assert {p.name for p in code_digest.module_files("relplugin.family")} == {
        "__init__.py",
        "family.py",
        "helpers.py",
    }
    (package / "helpers.py").write_text("SCALE = 3\n")
    assert plugins.source_digest("relplugin.family") != before
    first = plugins.module_digest("relplugin.family")
    real = code_digest.code_digest
    edited = "vqarobust.models.base"
    monkeypatch.setattr(code_digest, "code_digest", lambda m: "x" if m == edited else real(m))
    assert plugins.module_digest("relplugin.family") != first
    assert plugins.digest_of("relplugin.family") == plugins.source_digest("relplugin.family")
    assert plugins.digest_of("vqarobust.models.base") is None
