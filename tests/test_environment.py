"""The pinned lock (envs/constraints.txt) and what provenance records of the machine."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from vqarobust.environment import (
    LOCK_FILE,
    lock_differences,
    lock_record,
    lock_sentence,
    machine,
    read_lock,
)

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        found += [Requirement(r) for r in extra]
    return found


def test_the_lock_pins_every_requirement_within_pyprojects_ranges() -> None:
    lock = read_lock(ROOT / LOCK_FILE)
    outside = []
    for req in _requirements():
        name = canonicalize_name(req.name)
        if name not in lock:
            outside.append(f"{req.name}: not in the lock")
        elif not req.specifier.contains(lock[name], prereleases=True):
            outside.append(f"{req.name}: locked {lock[name]}, pyproject asks {req.specifier}")
    assert outside == []


def _install_closure(root: str) -> set[str]:
    """The packages ``pip install root`` installs on this platform, walked through the
    installed metadata with each requirement's markers evaluated for its extras."""
    seen: set[str] = set()
    todo = [Requirement(root)]
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        for extra in req.extras or {""}:
            key = f"{name}[{extra}]"
            if key in seen:
                continue
            seen.add(key)
            for text in metadata.distribution(name).requires or []:
                dep = Requirement(text)
                if dep.marker is None or dep.marker.evaluate({"extra": extra}):
                    todo.append(dep)
    return {key.split("[")[0] for key in seen}


def test_the_lock_pins_only_what_the_install_needs() -> None:
    """``pip freeze`` writes the lock, so a package left over from an older resolve stays
    pinned; a fresh install then lacks it and every summary warns (tzdata was such a
    pin once python-dateutil 4 left the lock)."""
    needed = _install_closure("vqarobust[dev]")
    assert sorted(set(read_lock(ROOT / LOCK_FILE)) - needed) == []


def test_read_lock_normalises_names_and_names_a_bad_line(tmp_path: Path) -> None:
    good = tmp_path / "c.txt"
    good.write_text("# header\n\nPyYAML==6.0.2\nimagecorruptions_imaug==1.1.5  # fork\n")
    assert read_lock(good) == {"pyyaml": "6.0.2", "imagecorruptions-imaug": "1.1.5"}
    bad = tmp_path / "bad.txt"
    bad.write_text("numpy==2.4.6\ntorch>=2\n")
    with pytest.raises(ValueError, match=r"bad.txt:2: not a name==version pin: 'torch>=2'"):
        read_lock(bad)


def test_lock_differences_count_changed_and_missing_pins_only() -> None:
    lock = {"numpy": "2.4.6", "torch": "2.13.0+cpu", "polars": "2.1.0"}
    installed = {"numpy": "2.4.6", "torch": "2.14.1", "extra-package": "1.0"}
    assert lock_differences(lock, installed) == {
        "polars": {"locked": "2.1.0", "installed": None},
        "torch": {"locked": "2.13.0+cpu", "installed": "2.14.1"},
    }
    record = {"file": LOCK_FILE, "pins": 3, "differences": lock_differences(lock, installed)}
    assert lock_sentence(record) == (
        "Warning: 2 of the 3 packages pinned in envs/constraints.txt ran at other versions: "
        "polars not installed (locked 2.1.0), torch 2.14.1 (locked 2.13.0+cpu); numbers may "
        "differ from those the lock produced (`vqarobust provenance` lists them)."
    )
    assert lock_sentence({**record, "differences": {}}) is None
    assert lock_sentence(None) is None


def test_lock_record_reads_the_checkouts_lock_or_says_there_is_none(tmp_path: Path) -> None:
    assert lock_record(tmp_path) == {"file": None}
    assert lock_record(None) == {"file": None}
    (tmp_path / "envs").mkdir()
    (tmp_path / LOCK_FILE).write_text("no-such-package-anywhere==1.0\n")
    assert lock_record(tmp_path) == {
        "file": LOCK_FILE,
        "pins": 1,
        "differences": {"no-such-package-anywhere": {"locked": "1.0", "installed": None}},
    }


def test_machine_records_the_kernel_level_and_threads_the_process_runs_with() -> None:
    code = (
        "import json, torch; from vqarobust.environment import machine; "
        "torch.set_num_threads(1); print(json.dumps(machine()))"
    )
    env = {"ATEN_CPU_CAPABILITY": "default", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    forced = json.loads(done.stdout)
    assert forced["cpu_capability"] == "DEFAULT"
    assert forced["torch_threads"] == 1
    assert forced["variables"] == {"ATEN_CPU_CAPABILITY": "default"}
    here = machine()
    assert here["cpu"] == forced["cpu"] and here["cpu"]
    assert here["cores"] >= 1


def test_the_assembling_job_records_its_host_without_importing_torch() -> None:
    # load_duckdb runs no kernel: importing torch only to record its threads cost the
    # job 1.7 s, four times the rest of its work on the tiny run.
    code = (
        "import json, sys; from vqarobust.provenance import collect; "
        "info = collect(config=None, prediction_paths=[], dataset_files={}, "
        "dataset_info={}, seed=0); "
        "print(json.dumps([info['provenance.machine'], 'torch' in sys.modules]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    recorded, imported = json.loads(done.stdout.splitlines()[-1])
    assert imported is False
    here = machine()
    assert json.loads(recorded) == {k: here[k] for k in ("cpu", "cores", "variables")}


def test_the_readmes_torch_recipes_match_the_lock_and_pyproject() -> None:
    """The lock and pyproject pin one torch and torchvision pair, the README names it, and
    PyTorch's CPU builds of the pair (``2.14.1+cpu``, the README's CPU-only recipe) meet
    both the lock's pins and pyproject's."""
    from packaging.specifiers import SpecifierSet

    readme = " ".join((ROOT / "README.md").read_text().split())
    lock = read_lock(ROOT / LOCK_FILE)
    requirements = {r.name: r for r in _requirements()}
    for name in ("torch", "torchvision"):
        pinned = lock[name]
        assert "+" not in pinned, f"the lock pins a local build of {name}: {pinned}"
        assert f"`{name}=={pinned}`" in readme
        assert requirements[name].specifier.contains(pinned)
        cpu_build = f"{pinned}+cpu"
        assert SpecifierSet(f"=={pinned}").contains(cpu_build)
        assert requirements[name].specifier.contains(cpu_build)
    assert (
        "pip install --extra-index-url https://download.pytorch.org/whl/cpu "
        f"-c {LOCK_FILE} -e '.[dev]'" in readme
    )
