"""How every workflow script starts (vqarobust.jobs.start_job): its imports run with the
garbage collector off, and start_job freezes what they made and turns it back on."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))


def _statements(script) -> list[str]:
    """The script's statements after its docstring, each as source."""
    body = ast.parse(script.read_text()).body
    return [ast.unparse(node) for node in body[1:]]


def test_every_script_imports_with_the_collector_off_and_starts_its_job():
    assert len(SCRIPTS) > 20
    wrong = []
    for script in SCRIPTS:
        statements = _statements(script)
        if statements[:2] != ["import gc", "gc.disable()"]:
            wrong.append(f"{script.name}: begins {statements[:2]}")
        if not any(s.startswith("start_job(") for s in statements):
            wrong.append(f"{script.name}: never calls start_job")
    assert not wrong, "\n".join(wrong)


PROBE = """
import gc, json, sys
gc.disable()
import polars
from vqarobust.jobs import start_job
garbage = []
garbage.append(garbage)  # a cycle made before the job starts
del garbage
before = (gc.isenabled(), gc.get_freeze_count())
start_job(sys.argv[1])
print(json.dumps({"before": before, "after": [gc.isenabled(), gc.get_freeze_count()]}))
"""


def test_start_job_freezes_the_imports_and_turns_the_collector_back_on(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "job.log")],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(proc.stdout.splitlines()[-1])
    assert seen["before"] == [False, 0]
    enabled, frozen = seen["after"]
    # Everything the imports made, polars' modules among them, is frozen: thousands.
    assert enabled is True and frozen > 10_000
