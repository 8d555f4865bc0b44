"""The garbage collector in a job process: heavy imports made with it off, then frozen.

A workflow script turns the collector off before its imports (its first lines) and
:func:`vqarobust.jobs.start_job` calls :func:`freeze_imports`. What the package imports
later, lazily (a model family's adapter with transformers, the sentence encoder), goes
through :func:`imports_paused` at the few places that load it. Why: an import of
transformers' model code makes some 500,000 objects that live as long as the job, and
each full collection during the import walks every object made since the last freeze,
then the interpreter's shutdown walks them once more; frozen objects are never walked
again (docs/performance.md, "Collections in job processes").
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


def freeze_imports() -> None:
    """Freeze every object made so far (a job script's imports, made with the collector
    off) and turn the collector on for the job's own work."""
    gc.freeze()
    gc.enable()


@contextmanager
def imports_paused() -> Iterator[None]:
    """Run the block (an import) with the collector off, then freeze what it made, in a
    job process: one whose imports :func:`freeze_imports` froze. Anywhere else (the CLI,
    a notebook, a test) the block runs as it is: a freeze there would also keep whatever
    that process holds at the time from ever being collected, and such a process imports
    once for many uses anyway. A job accepts that cost for what it made before the block:
    it ends soon, and what it made so far is mostly what it still uses."""
    if gc.get_freeze_count() == 0 or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        freeze_imports()
