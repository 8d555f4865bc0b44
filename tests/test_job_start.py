"""How every workflow script starts (vqarobust.jobs.start_job): its imports run with the
garbage collector off, and start_job freezes what they made and turns it back on."""

from __future__ import annotations

import ast
import json
import subprocess
import sys

from tests.conftest import REPO

SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))


def test_every_script_imports_with_the_collector_off_and_starts_its_job():
    assert len(SCRIPTS) > 20
    wrong = []
    for script in SCRIPTS:
        body = ast.parse(script.read_text()).body[1:]
        statements = [ast.unparse(node) for node in body]
        if statements[:2] != ["import gc", "gc.disable()"]:
            wrong.append(f"{script.name}: begins {statements[:2]}")
        starts = [i for i, s in enumerate(statements) if s.startswith("start_job(")]
        if not starts:
            wrong.append(f"{script.name}: never calls start_job")
            continue
        # Nothing but imports with the collector off: work there would keep its garbage.
        between = body[2 : starts[0]]
        if not all(isinstance(n, (ast.Import, ast.ImportFrom)) for n in between):
            wrong.append(f"{script.name}: runs more than imports before start_job")
    assert not wrong, "\n".join(wrong)


PROBE = """
import gc, json, sys
gc.disable()
import polars
from vqarobust.jobs import start_job
tracked = len(gc.get_objects())
start_job(sys.argv[1])
print(json.dumps({"tracked": tracked, "after": [gc.isenabled(), gc.get_freeze_count()]}))
"""


def test_start_job_freezes_the_imports_and_turns_the_collector_back_on(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path / "job.log")],
        capture_output=True,
        text=True,
        check=True,
    )
    seen = json.loads(proc.stdout.splitlines()[-1])
    enabled, frozen = seen["after"]
    # What the imports made (polars' modules among them) is frozen, less a few
    # temporaries freed meanwhile, and the collector is on again for the job's own work.
    assert enabled is True and seen["tracked"] > 10_000
    assert seen["tracked"] - 100 <= frozen <= seen["tracked"]
