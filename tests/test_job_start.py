"""How every workflow script starts (vqarobust.jobs.start_job): its imports run with the
garbage collector off, and start_job freezes what they made and turns it back on."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from typing import Any

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


def _probe(code: str, *args: str) -> Any:
    """What a fresh process running ``code`` printed last, as JSON."""
    proc = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.splitlines()[-1])


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
    seen = _probe(PROBE, str(tmp_path / "job.log"))
    enabled, frozen = seen["after"]
    # What the imports made (polars' modules among them) is frozen, less a few
    # temporaries freed meanwhile, with what start_job made itself (the log's handlers,
    # the plugins), and the collector is on again for the job's own work.
    assert enabled is True and seen["tracked"] > 10_000
    assert seen["tracked"] - 100 <= frozen <= seen["tracked"] + 2_000


JOB_START = "gc.disable()\nfrom vqarobust.collector import freeze_imports\nfreeze_imports()"
LAZY = """
import gc, json
{start}
from vqarobust.collector import imports_paused
before = gc.get_freeze_count()
with imports_paused():
    inside = gc.isenabled()
    import polars
added = gc.get_freeze_count() - before
print(json.dumps({{"added": added, "inside": inside, "enabled": gc.isenabled()}}))
"""


def test_a_lazy_import_in_a_job_is_paused_and_frozen():
    from_job = _probe(LAZY.format(start=JOB_START))
    # Off for the import, polars' objects frozen after it, on again.
    assert from_job["inside"] is False and from_job["enabled"] is True
    assert from_job["added"] > 10_000
    # Elsewhere (no import of the process was frozen) nothing changes.
    elsewhere = _probe(LAZY.format(start="import vqarobust.collector"))
    assert elsewhere == {"added": 0, "inside": True, "enabled": True}


# The places that load heavy code lazily in a job: a model family's adapter module (here
# the classifier's, with transformers' model code, before the missing checkpoint fails)
# and the sentence encoder's sentence-transformers.
LOADS = """
import gc, json, sys
gc.disable()
import vqarobust.models, vqarobust.text.encoder
from vqarobust.collector import freeze_imports
freeze_imports()
before = gc.get_freeze_count()
try:
    vqarobust.models.load_model({"family": "vqa-classifier", "path_or_id": sys.argv[1]})
except OSError:
    pass
model = gc.get_freeze_count()
assert "sentence_transformers" not in sys.modules
vqarobust.text.encoder.load()
print(json.dumps([model - before, gc.get_freeze_count() - model, gc.isenabled()]))
"""


def test_a_model_family_and_the_encoder_import_with_the_collector_paused(tmp_path):
    family, encoder, enabled = _probe(LOADS, str(tmp_path / "no-such-checkpoint"))
    assert enabled is True and family > 100_000 and encoder > 10_000
