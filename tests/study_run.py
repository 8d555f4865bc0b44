"""Run a shipped study config (config/*.yaml, a study of its own) with an override."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import REPO


def run_study(study: Path, workdir: Path, override: dict, *args: str) -> str:
    """Snakemake on ``study`` merged with ``override`` in ``workdir`` (2 cores); its
    console output, or an assertion error holding its tail."""
    (workdir / "override.yaml").write_text(yaml.safe_dump(override))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--configfile",
        str(study),
        str(workdir / "override.yaml"),
        "--replace-workflow-config",
        "--cores",
        "2",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-8000:]
    return out
