"""The machine and the package versions a run computed on, against the pinned lock.

The default study's numbers are reproducible only for the package versions of
``envs/constraints.txt`` (the README's first command installs with it) and, where float
sums are concerned, depend on the CPU's kernel level and thread counts (docs/workflow.md,
"The same numbers on another machine"). :func:`machine` records what an inference job
ran on; :func:`lock_differences` says which installed versions differ from the lock, which
provenance records and the summary warns of.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

# Where the lock lies in a workflow checkout, and the command that writes it.
LOCK_FILE = "envs/constraints.txt"
LOCK_COMMAND = ".venv/bin/pip freeze --exclude-editable > envs/constraints.txt"
# Environment variables that set the thread pools of torch's CPU kernels.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "ATEN_CPU_CAPABILITY")


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux, else the platform's word)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    found = re.search(r"^model name\s*:\s*(.+)$", text, flags=re.MULTILINE)
    return found.group(1).strip() if found else (platform.processor() or platform.machine())


def host() -> dict[str, Any]:
    """The CPU model, the cores the process may use and the thread variables set: what
    :func:`machine` records without importing torch, for a job that runs no kernel (the
    one assembling the tables would otherwise spend 1.7 s importing torch to record it)."""
    return {
        "cpu": cpu_model(),
        "cores": len(os.sched_getaffinity(0))
        if hasattr(os, "sched_getaffinity")
        else os.cpu_count(),
        "variables": {k: os.environ[k] for k in THREAD_VARIABLES if k in os.environ},
    }


def machine() -> dict[str, Any]:
    """What the float sums of a CPU job depend on: the CPU model, the kernel level torch
    dispatches to (``ATEN_CPU_CAPABILITY`` can force it lower), torch's intra- and
    inter-op thread counts, the thread variables set, and the cores the process may use."""
    import torch

    found = host()
    return {
        "cpu": found["cpu"],
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "cores": found["cores"],
        "variables": found["variables"],
    }


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def read_lock(path: str | os.PathLike[str]) -> dict[str, str]:
    """The ``name==version`` pins of a constraints file (normalised names); comments,
    blank lines and options are skipped, any other line is an error naming it."""
    pins: dict[str, str] = {}
    for number, raw in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not version.strip():
            raise ValueError(f"{path}:{number}: not a name==version pin: {raw!r}")
        pins[_normalise(name.strip())] = version.strip()
    return pins


def installed_versions() -> dict[str, str]:
    """Every installed distribution's version (normalised names)."""
    from importlib.metadata import distributions

    out: dict[str, str] = {}
    for dist in distributions():
        name = dist.metadata["Name"]
        if name:
            out.setdefault(_normalise(name), dist.version)
    return out


def lock_differences(
    lock: Mapping[str, str], installed: Mapping[str, str]
) -> dict[str, dict[str, str | None]]:
    """Per locked package whose installed version differs (or that is not installed):
    ``{"locked", "installed"}``. Packages installed beyond the lock are not counted: they
    cannot have changed a number the lock's run produced."""
    return {
        name: {"locked": version, "installed": installed.get(name)}
        for name, version in sorted(lock.items())
        if installed.get(name) != version
    }


def lock_record(workflow_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    """Provenance of the environment against the checkout's lock: its path, the number of
    pins and the differences; ``{"file": None}`` without a lock."""
    path = Path(workflow_dir) / LOCK_FILE if workflow_dir is not None else None
    if path is None or not path.is_file():
        return {"file": None}
    lock = read_lock(path)
    return {
        "file": LOCK_FILE,
        "pins": len(lock),
        "differences": lock_differences(lock, installed_versions()),
    }


def lock_sentence(record: Mapping[str, Any] | None) -> str | None:
    """The summary's warning when the run's versions differ from the lock, else None."""
    if not record or not record.get("differences"):
        return None
    diffs = record["differences"]
    named = ", ".join(
        f"{name} {d['installed'] or 'not installed'} (locked {d['locked']})"
        for name, d in list(diffs.items())[:5]
    )
    more = f" and {len(diffs) - 5} more" if len(diffs) > 5 else ""
    return (
        f"Warning: {len(diffs)} of the {record['pins']} packages pinned in {record['file']} "
        f"ran at other versions: {named}{more}; numbers may differ from those the lock "
        "produced (`vqarobust provenance` lists them)."
    )
