"""Give each concurrent inference job its own GPU.

Snakemake's ``--resources gpu=N`` only counts GPUs; it does not say which one a job may
use. A job leases a GPU by taking an exclusive ``flock`` on ``gpu-<id>.lock`` in a lock
directory shared by the jobs of the machine. The kernel drops the lock when the process
exits, however it exits, so a killed job never leaves a GPU leased. An existing
``CUDA_VISIBLE_DEVICES`` limits the candidates.

What happens without a free GPU is the model entry's ``device`` policy, never a silent
fallback: ``cuda`` fails with a message saying what to change, ``auto`` runs on the CPU
with a warning, ``cpu`` never looks for a GPU.

``VQAROBUST_PRETEND_GPUS=N`` is a test setting, never a fallback: a job then leases one
of N pretend GPUs (ids ``0`` to ``N-1``, the same locks) and runs on the CPU, saying so
in its log. It lets a machine without a GPU check that ``--resources gpu=N`` runs N GPU
jobs at once, each on a GPU of its own (``tests/test_gpu_concurrency.py``).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

LOCK_DIR_ENV = "VQAROBUST_GPU_LOCK_DIR"
PRETEND_ENV = "VQAROBUST_PRETEND_GPUS"
POLICIES = ("cuda", "auto", "cpu")


class NoGPUError(RuntimeError):
    """The job needs a GPU (device: cuda) and none is visible or free."""


def visible_gpus(n_gpus: int | None = None) -> list[str]:
    """Physical ids of the GPUs this process may use, in CUDA's local order.

    ``n_gpus`` overrides the count torch reports (for tests and dry planning). A
    ``CUDA_VISIBLE_DEVICES`` set by a scheduler names GPUs only as far as CUDA finds
    them: on a node without a working driver, none are usable whatever it says.
    """
    if n_gpus is None:
        import torch

        n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
        return ids[:n_gpus]
    return [str(i) for i in range(n_gpus)]


def pretend_gpus() -> int | None:
    """``$VQAROBUST_PRETEND_GPUS`` (a test setting: see the module's docstring), or None."""
    value = os.environ.get(PRETEND_ENV)
    if value is None:
        return None
    if not value.strip().isdigit() or int(value) < 1:
        raise ValueError(f"{PRETEND_ENV} must be a number of GPUs >= 1, not {value!r}")
    return int(value)


def default_lock_dir() -> Path:
    """``$VQAROBUST_GPU_LOCK_DIR``, else a per-user folder under the temp directory."""
    env = os.environ.get(LOCK_DIR_ENV)
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"vqarobust-gpu-locks-{os.getuid()}"


def _no_gpu(policy: str, who: str, why: str) -> str:
    if policy == "cuda":
        raise NoGPUError(
            f"{who} needs a GPU (device: cuda) but {why}. Run it where a GPU is free "
            "(with --resources gpu=N, at most the number of GPUs), or set device: cpu "
            "(or auto) in its entry to run it on the CPU"
        )
    log.warning("%s: %s; running on the CPU (device: auto)", who, why)
    return "cpu"


@contextlib.contextmanager
def lease_device(
    lock_dir: str | os.PathLike[str] | None = None,
    n_gpus: int | None = None,
    policy: str = "auto",
    who: str = "this job",
) -> Iterator[str]:
    """Yield ``cuda:<local index>`` of a GPU no other job holds, or ``cpu`` as ``policy`` allows.

    ``policy`` is ``cuda`` (a GPU or :class:`NoGPUError`), ``auto`` (a GPU, else the CPU
    with a warning) or ``cpu``. The lease lasts until the block exits or the process dies.
    """
    if policy not in POLICIES:
        raise ValueError(f"device must be one of {POLICIES}, not {policy!r}")
    if policy == "cpu":
        yield "cpu"
        return
    pretend = pretend_gpus()
    gpus = [str(i) for i in range(pretend)] if pretend else visible_gpus(n_gpus)
    if not gpus:
        env = os.environ.get("CUDA_VISIBLE_DEVICES")
        if env is None:
            why = "no GPU is visible (torch finds no CUDA device)"
        elif env.strip() in ("", "-1"):
            why = f"no GPU is visible (CUDA_VISIBLE_DEVICES={env!r})"
        else:
            why = f"CUDA finds none of the GPUs that CUDA_VISIBLE_DEVICES={env!r} names"
        yield _no_gpu(policy, who, why)
        return
    folder = Path(lock_dir) if lock_dir else default_lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    for local, physical in enumerate(gpus):
        fh = open(folder / f"gpu-{physical}.lock", "a+")  # noqa: SIM115 (held for the lease)
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            continue
        try:
            fh.seek(0)
            fh.truncate()
            fh.write(f"{os.getpid()}\n")
            fh.flush()
            if pretend:
                log.info(
                    "leased pretend GPU %s of %d (%s, a test setting): running on the CPU",
                    physical,
                    pretend,
                    PRETEND_ENV,
                )
                yield "cpu"
            else:
                log.info("leased GPU %s (cuda:%d)", physical, local)
                yield f"cuda:{local}"
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()
            log.info("released GPU %s", physical)
        return
    yield _no_gpu(policy, who, f"all {len(gpus)} visible GPUs are leased by other jobs")
