"""A venv with lmms-eval (envs/lmms-eval.txt) for the tests that run the harness itself,
and folders of pinned packages that one test puts ahead of the venv (envs/googlebatch.txt).

lmms-eval pins packages the project's own lock does not (filelock below 4, packaging 26),
so it gets a venv of its own. That venv sees the project's venv through a ``.pth`` file:
torch, transformers and datasets are the project's, and only the pinned rest is
downloaded. It is built once per requirements file and Python, under the package's
cache folder (:func:`vqarobust.user_cache.cache_root`), into a temporary folder renamed
into place, so an interrupted build is never reused; a file lock lets one process build
it while others wait. :func:`build_in_background` starts that build in a thread when a
session collects the test, so the download overlaps the tests that run before it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import threading
from collections.abc import Callable
from pathlib import Path

from vqarobust.user_cache import cache_root

REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = REPO / "envs" / "lmms-eval.txt"


def venv_key(requirements: Path = REQUIREMENTS) -> str:
    """The requirements' content and this Python's version and base venv: a change of
    any builds a new venv."""
    h = hashlib.sha256(requirements.read_bytes())
    h.update(sys.version.encode())
    h.update(sysconfig.get_paths()["purelib"].encode())
    return h.hexdigest()[:16]


def _built_once(target: Path, build: Callable[[Path], None]) -> Path:
    """``target``, made by ``build`` into a staged folder renamed into place when missing,
    under a file lock (other processes wait; an interrupted build is never reused)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{target.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            staged = target.parent / f"{target.name}.partial-{os.getpid()}"
            shutil.rmtree(staged, ignore_errors=True)
            try:
                build(staged)
                staged.rename(target)
            finally:
                shutil.rmtree(staged, ignore_errors=True)
    return target


def lmms_eval_python(requirements: Path = REQUIREMENTS) -> Path:
    """The Python of a venv where ``python -m lmms_eval`` runs, built if missing."""
    target = cache_root() / f"lmms-eval-{venv_key(requirements)}"
    return _built_once(target, lambda staged: _build(staged, requirements)) / "bin" / "python"


def package_dir(requirements: Path) -> Path:
    """A folder of the pinned packages of ``requirements`` alone (``pip install --no-deps
    --target``), for ``PYTHONPATH`` ahead of the project's venv, built if missing: the
    way to shadow one pin of the lock for one process (envs/googlebatch.txt)."""

    def build(staged: Path) -> None:
        pip = [sys.executable, "-m", "pip", "install", "-q", "--no-deps"]
        subprocess.run([*pip, "--target", str(staged), "-r", str(requirements)], check=True)

    return _built_once(cache_root() / f"{requirements.stem}-{venv_key(requirements)}", build)


def build_in_background(requirements: Path = REQUIREMENTS) -> threading.Thread:
    """Build the venv in a daemon thread; the test's own call waits on the lock."""

    def build() -> None:
        # The test's own call builds again and raises what went wrong.
        with contextlib.suppress(OSError, subprocess.CalledProcessError):
            lmms_eval_python(requirements)

    thread = threading.Thread(target=build, name="lmms-eval-venv", daemon=True)
    thread.start()
    return thread


def _build(staged: Path, requirements: Path) -> None:
    """Make the venv at ``staged``: the project's site-packages beneath, the pins on top.
    ``python -m`` still works after the rename into place (bin/python is a link to the base
    Python, and the venv is found from it); the scripts in bin/ would not and are never
    used."""
    subprocess.run([sys.executable, "-m", "venv", str(staged)], check=True)
    py = staged / "bin" / "python"
    site = subprocess.run(
        [str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (Path(site) / "_vqarobust_base.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    pip = [str(py), "-m", "pip", "install", "-q", "--no-deps", "-r", str(requirements)]
    subprocess.run(pip, check=True)
