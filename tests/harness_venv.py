"""A venv with lmms-eval (envs/lmms-eval.txt) for the tests that run the harness itself.

lmms-eval pins packages the project's own lock does not (filelock below 4, packaging 26),
so it gets a venv of its own. That venv sees the project's venv through a ``.pth`` file:
torch, transformers and datasets are the project's, and only the pinned rest is
downloaded. It is built once per requirements file and Python, under
``$VQAROBUST_CACHE`` (default ``~/.cache/vqarobust``), into a temporary folder renamed
into place, so an interrupted build is never reused.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REQUIREMENTS = REPO / "envs" / "lmms-eval.txt"


def cache_root() -> Path:
    """Where built harness venvs are kept between sessions."""
    return Path(os.environ.get("VQAROBUST_CACHE", Path.home() / ".cache" / "vqarobust"))


def venv_key(requirements: Path = REQUIREMENTS) -> str:
    """The requirements' content and this Python's version and base venv: a change of
    any builds a new venv."""
    h = hashlib.sha256(requirements.read_bytes())
    h.update(sys.version.encode())
    h.update(sysconfig.get_paths()["purelib"].encode())
    return h.hexdigest()[:16]


def lmms_eval_python(requirements: Path = REQUIREMENTS) -> Path:
    """The Python of a venv where ``python -m lmms_eval`` runs, built if missing."""
    target = cache_root() / f"lmms-eval-{venv_key(requirements)}"
    python = target / "bin" / "python"
    if python.exists():
        return python
    target.parent.mkdir(parents=True, exist_ok=True)
    # Built under a unique name and renamed once pip has finished; ``python -m`` still
    # works after the rename (bin/python is a link to the base Python, and the venv is
    # found from it), the scripts in bin/ would not and are never used.
    staged = target.parent / f"{target.name}.partial-{os.getpid()}"
    shutil.rmtree(staged, ignore_errors=True)
    try:
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
        staged.rename(target)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return python
