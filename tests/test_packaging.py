"""The package works installed non-editably (as on a cluster node): the config schema,
the model repository, the report's templates (each section's partial too) and captions
travel as package data, and a failed job logs its traceback."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.conftest import REPO

CHECK = """
import vqarobust, yaml
from vqarobust.config import load_config
from vqarobust.models.repository import read_repository
cfg = load_config({paper!r})
assert cfg["models"]["blip"]["path_or_id"] == "Salesforce/blip-vqa-base"
assert "llava-1.5-13b" in read_repository()
from vqarobust.report.html import caption, page_template
from vqarobust.report.sections import SECTIONS
page = page_template()
assert page.blocks.keys() >= {{"summary", "context", "provenance"}}
for section in SECTIONS:
    page.environment.get_template(section.template)
assert caption("relative_drop")
print("ok", vqarobust.__file__)
"""


def test_wheel_install_from_another_folder_validates_configs(tmp_path):
    # Build from a copy: an in-tree build would leave build/ in the checkout.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    shutil.copytree(REPO / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__"))
    pip = [sys.executable, "-m", "pip", "-q"]
    wheel_dir = str(tmp_path / "wheel")
    subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", wheel_dir, str(source)],
        check=True,
        capture_output=True,
    )
    wheel = next((tmp_path / "wheel").glob("vqarobust-*.whl"))
    subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(tmp_path / "target"), str(wheel)],
        check=True,
        capture_output=True,
    )
    paper = tmp_path / "paper.yaml"
    paper.write_text((REPO / "config" / "paper.yaml").read_text())
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "target")}
    out = subprocess.run(
        [sys.executable, "-c", CHECK.format(paper=str(paper))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert str(tmp_path / "target") in out.stdout


def test_a_failed_job_logs_its_traceback(tmp_path):
    log = tmp_path / "job.log"
    code = (
        "from vqarobust.logs import setup_logging\n"
        f"setup_logging({str(log)!r})\n"
        "def load():\n"
        "    raise FileNotFoundError('weights of llava are missing')\n"
        "load()\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0
    text = log.read_text()
    assert "job failed" in text and "Traceback (most recent call last)" in text
    assert "in load" in text and "FileNotFoundError: weights of llava are missing" in text
