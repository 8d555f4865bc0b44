"""Give each concurrent inference job its own GPU.

Snakemake's ``--resources gpu=N`` only counts GPUs; it does not say which one a job may
use. A job leases a GPU by taking an exclusive ``flock`` on ``gpu-<id>.lock`` in a lock
directory shared by the jobs of the machine. The kernel drops the lock when the process
exits, however it exits, so a killed job never leaves a GPU leased. An existing
``CUDA_VISIBLE_DEVICES`` limits the candidates; with no GPU present or none free, the job
runs on the CPU.
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


def visible_gpus(n_gpus: int | None = None) -> list[str]:
    """Physical ids of the GPUs this process may use, in CUDA's local order.

    ``n_gpus`` overrides the count torch reports (for tests and dry planning).
    """
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is not None:
        ids = [d.strip() for d in env.split(",") if d.strip() and d.strip() != "-1"]
        return ids if n_gpus is None else ids[:n_gpus]
    if n_gpus is None:
        import torch

        n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return [str(i) for i in range(n_gpus)]


def default_lock_dir() -> Path:
    """``$VQAROBUST_GPU_LOCK_DIR``, else a per-user folder under the temp directory."""
    env = os.environ.get(LOCK_DIR_ENV)
    if env:
        return Path(env)
    return Path(tempfile.gettempdir()) / f"vqarobust-gpu-locks-{os.getuid()}"


@contextlib.contextmanager
def lease_device(
    lock_dir: str | os.PathLike[str] | None = None, n_gpus: int | None = None
) -> Iterator[str]:
    """Yield ``cuda:<local index>`` of a GPU no other job holds, or ``cpu``.

    The lease lasts until the block exits or the process dies.
    """
    gpus = visible_gpus(n_gpus)
    if not gpus:
        log.info("no GPU visible: running on CPU")
        yield "cpu"
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
            log.info("leased GPU %s (cuda:%d)", physical, local)
            yield f"cuda:{local}"
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
            fh.close()
        return
    log.warning("all %d visible GPUs are leased by other jobs: running on CPU", len(gpus))
    yield "cpu"
