"""Style gates, so the README's one test command checks them too."""

import subprocess
import sys

from tests.conftest import REPO


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=REPO, capture_output=True, text=True
    )


def test_ruff_check():
    proc = _ruff("check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format():
    proc = _ruff("format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_snakefmt():
    """The Snakefile and rules/*.smk as snakefmt writes them (the workflow catalog runs
    it next to --lint; line length 100 from pyproject.toml, as for ruff)."""
    files = ["Snakefile", *sorted(str(p.relative_to(REPO)) for p in (REPO / "rules").glob("*.smk"))]
    proc = subprocess.run(
        [sys.executable, "-m", "snakefmt", "--check", "--diff", *files],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
