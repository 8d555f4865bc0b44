"""The one rerun rule (vqarobust.code_digest, vqarobust.plan.code): a job's code param is
the digest of the package code its script imports, docstrings and comments left out, with
the registered entries it applies; the code half of the invalidation matrix."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
import textwrap
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from tests.conftest import REPO
from vqarobust import code_digest as cd
from vqarobust.config import validate_config
from vqarobust.plan import StudyPlan
from vqarobust.plan.code import script_modules

SCRIPTS = REPO / "workflow" / "scripts"
PACKAGE = REPO / "src" / "vqarobust"


def _package(root: Path, files: dict[str, str]) -> None:
    for name, body in files.items():
        path = root / "rerunpkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(body))


@pytest.fixture
def rerunpkg(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m.startswith("rerunpkg")]:
        monkeypatch.delitem(sys.modules, name)
    _package(
        tmp_path,
        {
            "__init__.py": "",
            "a.py": '''\
            """Module a."""
            from rerunpkg import b

            CORRUPTIONS = b.Registry()


            def helper(x):
                """Doubles."""
                return 2 * x  # why: a comment


            @CORRUPTIONS.register(family="weather")
            def snow(x):
                """Snow."""
                return helper(x) + 1


            @CORRUPTIONS.register("fog2", family="weather")
            def fog(x):
                return helper(x) + 2
            ''',
            "b.py": "class Registry:\n    pass\n",
        },
    )
    return tmp_path / "rerunpkg"


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_docstrings_comments_and_layout_change_no_digest(rerunpkg):
    before = (cd.code_digest("rerunpkg.a"), cd.entry_digest("rerunpkg.a", "snow"))
    _edit(rerunpkg / "a.py", '"""Module a."""', '"""Module a, documented at length."""')
    _edit(rerunpkg / "a.py", '"""Snow."""', '"""Snow, as the paper has it."""')
    _edit(rerunpkg / "a.py", "# why: a comment", "# another comment")
    _edit(rerunpkg / "a.py", "return 2 * x", "return (\n        2 * x\n    )")
    assert (cd.code_digest("rerunpkg.a"), cd.entry_digest("rerunpkg.a", "snow")) == before
    _edit(rerunpkg / "a.py", "return (\n        2 * x\n    )", "return 3 * x")
    assert cd.code_digest("rerunpkg.a") != before[0]  # code: every job importing a


def test_an_entry_edit_changes_that_entry_alone(rerunpkg):
    module = cd.code_digest("rerunpkg.a")
    snow, fog = cd.entry_digest("rerunpkg.a", "snow"), cd.entry_digest("rerunpkg.a", "fog2")
    _edit(rerunpkg / "a.py", "return helper(x) + 1", "return helper(x) + 10")
    assert cd.code_digest("rerunpkg.a") == module  # the registry's importers rerun nothing
    assert cd.entry_digest("rerunpkg.a", "fog2") == fog
    assert cd.entry_digest("rerunpkg.a", "snow") != snow
    # A helper both use is the module's code: every entry changes.
    _edit(rerunpkg / "a.py", "return 2 * x", "return 4 * x")
    assert cd.entry_digest("rerunpkg.a", "fog2") != fog


def test_a_parse_is_kept_on_disk_by_content_and_a_bad_entry_is_parsed_again(
    rerunpkg, tmp_path, monkeypatch
):
    cache = tmp_path / "cache"
    monkeypatch.setenv("VQAROBUST_CACHE", str(cache))

    def digests() -> tuple[str, str]:
        # As a new process would: nothing of this one's reads or answers kept.
        cd._read.cache_clear()
        monkeypatch.setattr(cd, "_DIGESTS", {})
        return cd.code_digest("rerunpkg.a"), cd.entry_digest("rerunpkg.a", "snow")

    parse = cd._parse

    def parses_nothing() -> None:
        monkeypatch.setattr(cd, "_parse", lambda *a: pytest.fail(f"parsed again: {a[1:]}"))

    cold = digests()
    kept = sorted((cache / "code-digest").iterdir())
    # __init__.py, a.py and b.py, each as module_files and as code_digest read it.
    assert [p.suffix for p in kept] == [".z"] * 6
    source = (rerunpkg / "a.py").read_bytes()
    assert cd._parse_cached(source, False, "rerunpkg", "rerunpkg") == parse(
        source, False, "rerunpkg", "rerunpkg"
    )
    # Another process reads the kept parses: the same digests, nothing parsed.
    parses_nothing()
    assert digests() == cold
    monkeypatch.setattr(cd, "_parse", parse)
    # Entries cut short, or of the right syntax and the wrong kinds, are parsed again
    # and written whole, and then read.
    for i, path in enumerate(kept):
        foreign = json.dumps({"imports": "abc", "code": 1, "entries": [], "imported": []})
        path.write_bytes(path.read_bytes()[:10] if i % 2 else zlib.compress(foreign.encode()))
    assert digests() == cold
    assert sorted((cache / "code-digest").iterdir()) == kept
    for path in kept:
        cd._source_of(json.loads(zlib.decompress(path.read_bytes())))  # whole again
    parses_nothing()
    assert digests() == cold
    monkeypatch.setattr(cd, "_parse", parse)
    # An edit is a new entry.
    _edit(rerunpkg / "a.py", "return 2 * x", "return 3 * x")
    edited = digests()
    assert edited[0] != cold[0]
    assert len(list((cache / "code-digest").iterdir())) == 8
    # A cache that cannot be written, or a process with no home folder and no variable
    # naming a cache, costs time only.
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv("VQAROBUST_CACHE", str(blocked))
    assert digests() == edited
    assert blocked.read_text() == ""
    for name in ("VQAROBUST_CACHE", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)

    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")  # as Path.home says it

    monkeypatch.setattr(Path, "home", no_home)
    assert digests() == edited
    assert not list(tmp_path.rglob("*.tmp"))
    cd._read.cache_clear()


# The code half of the invalidation matrix, on the real package ---------------------------

# One job of every rule with a script, with the wildcards that pick its entries.
JOBS = {
    "prepare_dataset": {"split": "eval"},
    "corrupt_images": {"corruption": "snow", "severity": "1"},
    "score_lpips": {"corruption": "snow", "severity": "1"},
    "object_boxes": {},
    "perturb_questions": {"perturbation": "keyboard"},
    "rewrite_questions": {"sentence": "back_translation"},
    "embed_questions": {},
    "embed_pool": {"source": "eval"},
    "rank_basic_questions": {"ranker": "bq_lasso"},
    "export_basic_questions": {"ranker": "bq_lasso"},
    "export_huggingface": {},
    "noise_questions": {"ranker": "bq_lasso"},
    "chain_questions": {"model": "vilt-tiny"},
    "swap_context": {},
    "train_detector": {"feature": "detector"},
    "extract_features": {"feature": "detector", "split": "eval"},
    "extract_image_features": {"feature": "detector"},
    "swap_features": {"feature": "detector"},
    "train_model": {"model": "vilt-tiny"},
    "run_model": {"model": "vilt-tiny", "subset": "snow"},
    "image_attention": {"model": "vilt-tiny"},
    "load_duckdb": {},
    "render_report": {},
}


@pytest.fixture(scope="module")
def default_plan() -> StudyPlan:
    config = validate_config(yaml.safe_load((REPO / "config" / "config.yaml").read_text()))
    return StudyPlan.build(config, scripts_dir=SCRIPTS)


@pytest.fixture
def plan(default_plan: StudyPlan) -> Iterator[StudyPlan]:
    """The default study's plan, built once for the module; its digests are forgotten
    before and after each test, which may point the package at an edited copy."""
    default_plan.refresh_code()
    yield default_plan
    default_plan.refresh_code()


def _digests(plan: StudyPlan) -> dict[str, str]:
    plan.refresh_code()  # the files may have been edited since the plan last asked
    return {rule: plan.code(rule)(SimpleNamespace(**wc)) for rule, wc in JOBS.items()}


def _rule_modules(plan: StudyPlan) -> dict[str, set[str]]:
    """The package files each job's digest must cover: its script's imports, and the
    module of the entry or model family it applies, transitively."""
    from vqarobust import perturbations
    from vqarobust.models import FAMILIES

    family = FAMILIES.entry(plan.config["models"]["vilt-tiny"]["family"])
    entries = {
        "corrupt_images": "snow",
        "perturb_questions": "keyboard",
        "rank_basic_questions": "bq_lasso",
    }
    out = {}
    for rule in JOBS:
        script = SCRIPTS / f"{'extract_features' if rule.startswith('extract') else rule}.py"
        modules = script_modules(script)
        if rule in entries:
            modules.append(perturbations.entry(entries[rule]).origin)
        if rule in ("run_model", "image_attention"):
            modules.append(family.tags.get("module", family.origin))
        if rule == "run_model":
            # The default study's model jobs draw attention maps, with the module their
            # script imports by name (vqarobust.inference.ATTENTION_MODULE).
            modules.append("vqarobust.attention")
        out[rule] = {
            p.relative_to(PACKAGE.parent).as_posix() for m in modules for p in cd.module_files(m)
        }
    return out


def _loaded_at_import() -> dict[str, set[str]]:
    """The package files each script's process actually loads when it runs the script's
    own import statements (a name a package loads on first use included; read in a fresh
    interpreter): what the static graph must not miss."""
    probe = textwrap.dedent(f"""
        import ast, json, sys
        from pathlib import Path
        out = {{}}
        for script in sorted(Path({str(SCRIPTS)!r}).glob("*.py")):
            for name in [m for m in sys.modules if m.split(".")[0] == "vqarobust"]:
                del sys.modules[name]
            tree = ast.parse(script.read_text())
            own = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                   and "vqarobust" in ast.dump(n)]
            exec(compile(ast.Module(own, []), str(script), "exec"), {{}})
            out[script.stem] = sorted(
                Path(m.__file__).as_posix() for n, m in sys.modules.items()
                if n.split(".")[0] == "vqarobust" and getattr(m, "__file__", None))
        print(json.dumps(out))
    """)
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=REPO
    )
    root = PACKAGE.parent.as_posix() + "/"
    return {
        k: {p.removeprefix(root) for p in v}
        for k, v in json.loads(proc.stdout.splitlines()[-1]).items()
    }


def _documented(source: str) -> str:
    """``source`` with its module docstring edited (or one added) and a comment more."""
    docstring = ast.get_docstring(ast.parse(source), clean=False)
    first = docstring.splitlines()[0] if docstring else ""
    if first and first in source:
        source = source.replace(first, f"Edited. {first}", 1)
    else:
        source = f'"""An added docstring."""\n{source}'
    return f"# an added comment\n{source}"


def test_an_edit_of_any_module_reruns_exactly_the_rules_that_import_it(plan, tmp_path, monkeypatch):
    copy = tmp_path / "vqarobust"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    covers = _rule_modules(plan)
    loaded = _loaded_at_import()
    monkeypatch.setattr(cd, "_package_dir", lambda package: copy)
    base = _digests(plan)
    wrong = []
    for path in sorted(copy.rglob("*.py")):
        name = f"vqarobust/{path.relative_to(copy).as_posix()}"
        original = path.read_text()
        try:
            path.write_text(_documented(original))
            if _digests(plan) != base:
                wrong.append(f"{name}: a docstring and a comment rerun something")
            path.write_text(f"{original}\n_rerun_probe = 1\n")
            changed = {rule for rule, d in _digests(plan).items() if d != base[rule]}
        finally:
            path.write_text(original)
        expected = {rule for rule, files in covers.items() if name in files}
        if changed != expected:
            wrong.append(f"{name}: reruns {sorted(changed)}, imported by {sorted(expected)}")
        script_rules = {r for r in JOBS if r != "extract_image_features"}
        missed = {r for r in script_rules if name in loaded.get(r, ()) and r not in changed}
        if missed:
            wrong.append(f"{name}: loaded by the scripts of {sorted(missed)}, reruns none")
    assert not wrong, "\n".join(wrong)


def test_editing_one_perturbation_reruns_its_jobs_alone(plan, tmp_path, monkeypatch):
    copy = tmp_path / "vqarobust"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cd, "_package_dir", lambda package: copy)

    def code(rule: str, **wildcards: str) -> str:
        return plan.code(rule)(SimpleNamespace(**wildcards))

    jobs = [("corrupt_images", {"corruption": c, "severity": "1"}) for c in ("snow", "fog")]
    jobs += [("perturb_questions", {"perturbation": p}) for p in ("keyboard", "ocr")]
    before = {(rule, json.dumps(wc)): code(rule, **wc) for rule, wc in jobs}
    others = _digests(plan)
    weather = copy / "corruptions" / "weather.py"
    lines = weather.read_text().splitlines(keepends=True)
    snow = next(n for n in ast.parse("".join(lines)).body if getattr(n, "name", "") == "snow")
    first = snow.body[0]  # its docstring: the statement goes after it
    lines.insert(first.end_lineno, " " * first.col_offset + "_ = 1\n")
    weather.write_text("".join(lines))
    plan.refresh_code()
    after = {(rule, json.dumps(wc)): code(rule, **wc) for rule, wc in jobs}
    changed = {key for key in before if before[key] != after[key]}
    assert changed == {("corrupt_images", json.dumps({"corruption": "snow", "severity": "1"}))}
    assert _digests(plan) == {**others, "corrupt_images": _digests(plan)["corrupt_images"]}


def test_an_entry_counts_the_entries_it_calls_and_importers_count_it(rerunpkg):
    """object_crop calls zoom_crop; a ranker's yes/no twin is the same function under
    another name; a module that imports an entry by name runs its code."""
    _edit(rerunpkg / "a.py", "return helper(x) + 2", "return snow(x) + 2")
    (rerunpkg / "c.py").write_text("from rerunpkg.a import snow\n\nY = snow(1)\n")
    fog, user = cd.entry_digest("rerunpkg.a", "fog"), cd.code_digest("rerunpkg.c")
    _edit(rerunpkg / "a.py", "return helper(x) + 1", "return helper(x) + 10")
    assert cd.entry_digest("rerunpkg.a", "fog") != fog  # fog calls snow
    assert cd.code_digest("rerunpkg.c") != user  # c runs snow


def test_every_definition_cut_out_of_a_module_belongs_to_a_registered_perturbation(plan):
    """A definition cut out of its module's digest counts only through the jobs that
    apply it: each must be the function of a registered perturbation of that module
    (found by its function's name, so a ranker's yes/no twin and the VQABQ chain count)."""
    from vqarobust import perturbations

    applied = {
        (perturbations.entry(n).origin, getattr(perturbations.entry(n).obj, "__name__", n))
        for n in perturbations.names()
    }
    orphans = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        module = module.removesuffix(".__init__")
        for name in cd._file(path, "vqarobust").entries:
            if (module, name) not in applied:
                orphans.append(f"{module}.{name}")
    assert not orphans, orphans


def test_a_plan_digests_the_code_once_until_refreshed(plan, tmp_path, monkeypatch):
    """A plan is a snapshot of the code: every job of one run gets the digests of the
    files as they were when first asked, and refresh_code reads them again."""
    copy = tmp_path / "vqarobust"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cd, "_package_dir", lambda package: copy)
    snow = SimpleNamespace(corruption="snow", severity="1")
    accuracy = SimpleNamespace(analysis="accuracy")

    def digests() -> tuple[str, str]:
        return plan.code("corrupt_images")(snow), plan.analyze.analysis_code(accuracy)

    before = digests()
    for path in (copy / "corruptions" / "weather.py", copy / "analyses" / "accuracy.py"):
        path.write_text(path.read_text() + "\n_rerun_probe = 1\n")
    assert digests() == before
    plan.refresh_code()
    after = digests()
    assert after[0] != before[0] and after[1] != before[1]
