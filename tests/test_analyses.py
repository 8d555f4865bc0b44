"""The analysis registry: settings that survive Snakemake's params, code digests that
follow imports, the runtime channel Snakemake leaves out of its comparison, and docs that
name every table."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

import vqarobust
from tests.conftest import REPO
from vqarobust.analyses import registry as analyses
from vqarobust.analyses.base import RunOptions, settings_params
from vqarobust.code_digest import code_digest, module_files
from vqarobust.runtime import Runtime

OPTIONS = RunOptions(
    weights={"a": 0.5},
    families={"snow": "weather", "blank": "control"},
    rscore={"tolerance": 0.05, "maximum": 20},
    image_subsets=[("clean", 0), ("snow", 1)],
    outside=["grayscale"],
    uncertainty={"resamples": 10},
    models={"m": {"family": "x"}},
    context=["swap_class"],
    reliance_k=[5, 10],
    feature_sources=["det"],
    features={"det": {"kind": "detector", "dim": 8}},
    vqabq={"ranker": "bq_cosine"},
)


@pytest.mark.parametrize("name", sorted(analyses.ANALYSES))
def test_settings_survive_params(name):
    analysis = analyses.get(name)
    settings = analysis.settings(OPTIONS)
    params = settings_params(settings)
    again = analysis.settings_from_params(params)
    assert settings_params(again) == params
    # Only JSON-like values: Snakemake compares their repr.
    assert repr(params) == repr(settings_params(analysis.settings_from_params(params)))


def test_registry_order_and_activity():
    names = list(analyses.ANALYSES)
    for a in analyses.ANALYSES.values():
        assert all(names.index(r) < names.index(a.name) for r in a.requires)
    plain = [a.name for a in analyses.active(RunOptions())]
    assert "vqabq" not in plain and "context_at_k" not in plain
    assert "context_findings" not in plain  # no config: no model_inputs
    every = [a.name for a in analyses.active(OPTIONS)]
    assert every == names
    # Tables are each written by one analysis.
    tables = [t for a in analyses.ANALYSES.values() for t in a.tables]
    assert len(tables) == len(set(tables))


def test_an_analysis_imports_only_its_own_module():
    # An analysis job asks for one analysis: the others' modules (and their libraries)
    # stay unimported; a module whose analysis has another name is refused.
    code = (
        "import sys\n"
        "from vqarobust.analyses.registry import get, check_order\n"
        "get('samples')\n"
        "print(sorted(m for m in sys.modules if m.startswith('vqarobust.analyses.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    loaded = ast.literal_eval(out.strip())
    assert "vqarobust.analyses.samples" in loaded
    assert not {f"vqarobust.analyses.{n}" for n in analyses.BUILT_IN if n != "samples"} & set(
        loaded
    )
    analyses.check_order()
    wrong = analyses.AnalysisTable({"scoring": "vqarobust.analyses.samples"})
    with pytest.raises(RuntimeError, match="defines 'samples'"):
        wrong["scoring"]


def test_affected_follows_requires():
    assert analyses.affected(OPTIONS, changed=["uncertainty"]) == [
        "uncertainty",
        "context_findings",
        "model_cards",
    ]
    assert analyses.affected(OPTIONS, groups=["attention"]) == ["attention"]
    assert "attention" not in analyses.affected(OPTIONS, groups=["predictions"])


def test_docs_name_every_table_with_its_analysis():
    text = (REPO / "docs" / "workflow.md").read_text()
    for a in analyses.ANALYSES.values():
        row = re.search(rf"^\| `{a.name}`[^\n]*$", text, flags=re.MULTILINE)
        assert row, a.name
        assert [t for t in a.tables if f"`{t}`" not in row.group(0)] == [], a.name


def _package(root: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        path = root / "digestpkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)


def test_code_digest_follows_imports(tmp_path, monkeypatch):
    _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": "from digestpkg.b import f\n\ndef g():\n    from digestpkg import c\n",
            "b.py": "X = 1\n",
            "c.py": "Y = 1\n",
            "d.py": "Z = 1\n",
        },
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("digestpkg")]:
        monkeypatch.delitem(sys.modules, name)
    files = {p.name for p in module_files("digestpkg.a")}
    assert files == {"__init__.py", "a.py", "b.py", "c.py"}
    before = code_digest("digestpkg.a")
    (tmp_path / "digestpkg" / "d.py").write_text("Z = 2\n")
    assert code_digest("digestpkg.a") == before  # not imported
    (tmp_path / "digestpkg" / "c.py").write_text("Y = 2\n")
    assert code_digest("digestpkg.a") != before  # imported inside a function


def test_each_analysis_digest_covers_its_metric_code():
    """Every analysis's digest holds its own module and each ``vqarobust.metrics`` module
    that the module imports (read from its source), and not another analysis's code."""
    package = Path(vqarobust.__file__).parent
    for a in analyses.ANALYSES.values():
        source = package / "analyses" / f"{a.module.rsplit('.', 1)[1]}.py"
        metrics = set()
        for node in ast.walk(ast.parse(source.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "vqarobust.metrics":
                metrics |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "vqarobust.metrics."
            ):
                metrics.add(node.module.rsplit(".", 1)[1])
        files = {p.resolve() for p in module_files(a.module)}
        wanted = {source.resolve()} | {(package / "metrics" / f"{m}.py").resolve() for m in metrics}
        assert wanted <= files, (a.name, sorted(map(str, wanted - files)))
    files = {str(p) for p in module_files(analyses.get("uncertainty").module)}
    assert any(f.endswith("metrics/intervals.py") for f in files)
    assert not any(f.endswith("analyses/samples.py") for f in files)


def test_editing_one_metric_reruns_only_the_analyses_that_use_it():
    # The metrics package loads its robustness names lazily: MMI's module is in the
    # digest of the analyses computing MMI only, not of every analysis.
    using = {
        a.name
        for a in analyses.ANALYSES.values()
        if any(p.name == "mmi.py" for p in module_files(a.module))
    }
    # image_quality reuses the robustness analysis's settings and counted rows.
    assert using == {"robustness", "uncertainty", "image_quality"}, using


def test_package_code_imports_lazy_metric_names_from_their_modules():
    # A name the metrics package loads lazily is invisible to the code digest when
    # imported through the package; code inside src/ imports it from its module.
    from vqarobust.metrics import LAZY

    src = Path(vqarobust.__file__).parent
    for path in src.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "vqarobust.metrics":
                lazy = {a.name for a in node.names} & set(LAZY)
                assert not lazy, f"{path}: import {sorted(lazy)} from vqarobust.metrics.<module>"


def test_snakemake_leaves_runtime_out_of_its_params_comparison():
    from snakemake.persistence import UNREPRESENTABLE, PersistenceBase

    serialize = PersistenceBase._serialize_param_builtin
    assert serialize(None, Runtime({"batch_size": 8})) is UNREPRESENTABLE
    assert serialize(None, {"batch_size": 8}) is not UNREPRESENTABLE


def test_no_script_reads_the_config():
    scripts = sorted((REPO / "workflow" / "scripts").glob("*.py"))
    readers = [p.name for p in scripts if "snakemake.config" in p.read_text()]
    assert scripts and readers == []
