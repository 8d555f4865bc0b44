"""Warm start: the jobs that need torch fork from one process that has imported it.

A job that runs a model spends most of a small subset's time importing torch and
transformers (about 4.6 s of a tiny inference job's 5.2 s of CPU on a 2-core EPYC,
docs/workflow.md, "Warm start"). A local run (``snakemake`` without a cluster executor)
therefore starts one *warm process* when it starts (the Snakefile's ``onstart``): it
imports :data:`PRELOAD` and waits on a Unix socket in ``.snakemake/``. Each torch job's
script calls :func:`hand_over` first; when a warm process serves this run, the script's
process sends its script path, working directory, arguments, environment and its
standard streams, and the warm process forks a child that runs the same script from the
top with the imports already done. The child is a fresh copy: nothing one job sets
(threads, seeds, logging, a loaded model) reaches another. The script's process waits
and exits with the child's exit status, so Snakemake sees the job as before.

What stays as it was:
- the answers: the child runs the same code on the same inputs (the tests compare a
  warm run with a cold one row for row);
- failures: a failed child's traceback is in the job's log and its exit status is the
  job's; a killed job (its script's process gone) kills its child;
- a cluster: no warm process is started, every job imports for itself; so does a job
  that asks for a GPU.

Where the two differ, the job runs cold and says why on its standard error: the warm
process imported other code (the package changed since the run started), or its
environment differs from the job's (a variable read at import time could differ).

A caveat of the measurement: Snakemake's benchmark file of a warm job measures its
script's process (its wall time is the job's; its CPU time and memory are not): the child
writes its own CPU time and peak memory as the last line of the job's log.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib
import json
import logging
import os
import resource
import runpy
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

ENV_SOCKET = "VQAROBUST_WARM_SOCKET"
ENV_CHILD = "VQAROBUST_WARM_CHILD"
# What the torch jobs import before their first line of work (workflow/scripts/: run_model,
# image_attention, train_model, embed_pool, embed_questions, rewrite_questions,
# extract_features, swap_features, train_detector).
PRELOAD = (
    "torch",
    "transformers.modeling_utils",
    "sentence_transformers",
    "vqarobust.inference",
    "vqarobust.attention",
    "vqarobust.models.classifier",
    "vqarobust.models.recipe",
    "vqarobust.text.encoder",
    "vqarobust.materialize.questions",
    "vqarobust.features.extract",
    "vqarobust.materialize.feature_context",
)
# How long a job waits for a warm process that is still importing (it starts with the
# run, while the first jobs prepare data).
READY_WAIT_S = 60.0
# What Snakemake sets for each job: its threads (every library's variable, the same count)
# and its temporary folder. The child takes the job's values and applies the thread count
# to the libraries already loaded (OpenMP and OpenBLAS read theirs when loaded). Any other
# difference between the job's environment and the warm process's sends the job cold.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
               "NUMEXPR_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")  # fmt: skip
# The shell that starts a job script sets its bookkeeping (``_``, ``SHLVL``, ``OLDPWD``).
PER_JOB = (*THREAD_VARS, "TMPDIR", "TEMP", "TEMPDIR", "TMP", "PWD", "OLDPWD", "SHLVL", "_",
           ENV_SOCKET, ENV_CHILD)  # fmt: skip


def package_digest() -> str:
    """SHA-256 of every Python file of the package (relative path and bytes): what the
    warm process imported must be what the job would import. The whole package, not
    :func:`vqarobust.code_digest.code_digest` of the preloaded modules: that one reads
    every file's imports (``ast``) and is made for a job's params, computed once per plan;
    this one runs in every job, and any edit to the package sending jobs cold is safe."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def socket_path(workdir: str | os.PathLike[str] = ".", run: int | None = None) -> Path:
    """Where the warm process of the run with pid ``run`` (default: this process) listens:
    in the working directory's ``.snakemake/``, one per run (two runs with different
    targets may share a folder); a Unix socket path must stay under about 100 bytes, so a
    deep working directory's goes under /tmp instead."""
    name = f"vqarobust-warm-{os.getpid() if run is None else run}.sock"
    path = Path(workdir).resolve() / ".snakemake" / name
    if len(os.fsencode(path)) < 100:
        return path
    digest = hashlib.sha256(os.fsencode(path)).hexdigest()[:16]
    return Path("/tmp") / f"vqarobust-warm-{digest}.sock"


def start(workdir: str | os.PathLike[str] = ".") -> subprocess.Popen | None:
    """Start this run's warm process (it imports in the background) and point the jobs
    this process starts at it through :data:`ENV_SOCKET`; None where one cannot start."""
    path = socket_path(workdir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for stale in (path, ready_path(path), pid_path(path)):
            stale.unlink(missing_ok=True)
        # os.environ, the environment the jobs are given, explicitly: a library's putenv()
        # that bypassed it would otherwise reach the warm process alone.
        proc = subprocess.Popen([sys.executable, "-m", "vqarobust.warm", str(path),
                                 str(os.getpid())], stdin=subprocess.DEVNULL,
                                env=dict(os.environ))  # fmt: skip
        pid_path(path).write_text(str(proc.pid))
    except OSError as exc:  # the jobs run cold, as without warm_start
        print(f"vqarobust.warm: no warm process: {exc}", file=sys.stderr)
        return None
    os.environ[ENV_SOCKET] = str(path)
    return proc


def stop(proc: subprocess.Popen | None) -> None:
    """End the warm process (it has no job of its own left: every job has ended)."""
    os.environ.pop(ENV_SOCKET, None)
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def ready_path(path: Path) -> Path:
    """The file the warm process writes once it listens: its pid and code digest."""
    return path.with_name(path.name + ".json")


def pid_path(path: Path) -> Path:
    """The file :func:`start` writes: the warm process's pid, while it still imports."""
    return path.with_name(path.name + ".pid")


def _ended(pid: int) -> bool:
    """No process ``pid`` of ours is running (a zombie, not yet reaped by the run, has
    ended)."""
    try:
        os.kill(pid, 0)
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(") ", 1)[1].startswith("Z")
    except (ProcessLookupError, PermissionError, FileNotFoundError):
        return True


def _send(conn: socket.socket, message: dict[str, Any], fds: list[int] | None = None) -> None:
    """One message: a 4-byte length, then JSON; ``fds`` travel with the length."""
    data = json.dumps(message).encode()
    head = len(data).to_bytes(4, "big")
    if fds:
        if socket.send_fds(conn, [head], fds) != len(head):
            raise OSError("the message's length was cut short")
    else:
        conn.sendall(head)
    conn.sendall(data)


def _exactly(conn: socket.socket, n: int, start: bytes = b"") -> bytes | None:
    """``n`` bytes (``start`` already read); None when the peer closed first."""
    buf = start
    while len(buf) < n:
        more = conn.recv(n - len(buf))
        if not more:
            return None
        buf += more
    return buf


def _receive(conn: socket.socket, n_fds: int = 0) -> tuple[dict[str, Any] | None, list[int]]:
    """One message (and up to ``n_fds`` file descriptors); None when the peer closed.
    Reads exactly one message: the next may already be on its way."""
    if n_fds:
        first, fds, _, _ = socket.recv_fds(conn, 4, n_fds)
    else:
        first, fds = conn.recv(4), []
    head = _exactly(conn, 4, first) if first else None
    body = _exactly(conn, int.from_bytes(head, "big")) if head else None
    return (None if body is None else json.loads(body)), fds


def _wait_ready(path: Path) -> dict[str, Any] | str:
    """The warm process's ready record, or why there is none."""
    ready, started = ready_path(path), pid_path(path)
    deadline = time.monotonic() + READY_WAIT_S
    while not ready.exists():
        if not started.exists() or _ended(int(started.read_text())):
            return f"the warm process of {path} has ended"
        if time.monotonic() > deadline:
            return f"no warm process answered at {path} within {READY_WAIT_S:.0f} s"
        time.sleep(0.05)
    try:
        info = json.loads(ready.read_text())
    except (FileNotFoundError, json.JSONDecodeError):  # removed as its process ended
        return f"the warm process of {path} has ended"
    if _ended(info["pid"]):
        return f"the warm process {info['pid']} has ended"
    return info


def hand_over(job: Any = None) -> None:
    """Run the calling script in this run's warm process and exit with its status;
    return at once where the script should run here: in the warm child itself, where no
    warm process serves the run, for a job that asks for a GPU (``job``: the script's
    ``snakemake`` object; CUDA cannot start in a process forked from one that may have
    touched the driver), or where the warm process cannot take this job (said on stderr)."""
    path = os.environ.get(ENV_SOCKET)
    if os.environ.get(ENV_CHILD) == "1" or not path:
        return
    if job is not None and int(getattr(job.resources, "gpu", 0) or 0) > 0:
        return
    info = _wait_ready(Path(path))
    if isinstance(info, str):
        print(f"vqarobust.warm: running cold: {info}", file=sys.stderr)
        return
    if info["code"] != package_digest():
        print("vqarobust.warm: running cold: the package changed since the warm process "
              "imported it", file=sys.stderr)  # fmt: skip
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError as exc:
        print(f"vqarobust.warm: running cold: cannot reach {path}: {exc}", file=sys.stderr)
        return
    request = {"script": os.path.abspath(sys.argv[0]), "argv": sys.argv, "cwd": os.getcwd(),
               "env": dict(os.environ)}  # fmt: skip
    try:
        _send(conn, request, [0, 1, 2])
        reply, _ = _receive(conn)
    except OSError as exc:
        print(f"vqarobust.warm: running cold: {exc}", file=sys.stderr)
        return
    if reply is None or "refused" in reply:
        # Refused, or gone before it began (the warm process ending as the run ends).
        why = "the warm process ended first" if reply is None else reply["refused"]
        print(f"vqarobust.warm: running cold: {why}", file=sys.stderr)
        return
    reply, _ = _receive(conn)  # after "started": the job's own exit status
    if reply is None:
        # The child died without a word (killed from outside, out of memory): the job
        # failed, and its outputs were never renamed into place.
        print("vqarobust.warm: the job's warm child ended without an exit status",
              file=sys.stderr)  # fmt: skip
        sys.exit(1)
    sys.exit(reply["exit"])


def _differences(ours: dict[str, str], theirs: dict[str, str]) -> list[str]:
    """The variables that differ, but for those set per job (:data:`PER_JOB`)."""
    keys = (set(ours) | set(theirs)) - set(PER_JOB)
    return sorted(k for k in keys if ours.get(k) != theirs.get(k))


def _take_job_environment(env: dict[str, str]) -> None:
    """The job's own values of :data:`PER_JOB`, its thread count applied to torch, OpenMP
    and BLAS as a fresh process started with them would have it."""
    import tempfile

    for key in PER_JOB:
        if key in env:
            os.environ[key] = env[key]
        else:
            os.environ.pop(key, None)
    tempfile.tempdir = None  # gettempdir() caches its first answer
    threads = {env[k] for k in THREAD_VARS if k in env}
    if not threads:
        return
    if len(threads) > 1 or not next(iter(threads)).isdigit():
        raise ValueError(f"thread counts {sorted(threads)} in the job's environment")
    n = int(threads.pop())
    import torch
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=n)
    torch.set_num_threads(n)


def _exit_status(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


def _run_child(conn: socket.socket, environment: dict[str, str]) -> None:
    """The forked child: become the job, run its script, report its exit status."""
    request, fds = _receive(conn, 3)
    if request is None or len(fds) != 3:
        os._exit(1)
    differ = _differences(environment, request["env"])
    if differ:
        _send(conn, {"refused": "its environment differs from the warm process's in "
                                + ", ".join(differ[:8])})  # fmt: skip
        os._exit(0)
    for fd, target in zip(fds, (0, 1, 2), strict=True):
        os.dup2(fd, target)
        os.close(fd)
    try:
        _take_job_environment(request["env"])
        os.chdir(request["cwd"])
    except (ValueError, OSError, ImportError) as exc:
        _send(conn, {"refused": f"{type(exc).__name__}: {exc}"})
        os._exit(0)
    sys.argv = list(request["argv"])
    sys.path[0] = os.path.dirname(request["script"])  # as for ``python script.py``
    os.environ[ENV_CHILD] = "1"
    _send(conn, {"started": True})

    def watch() -> None:
        # The script's process ended (killed with its job): so does this child.
        if not conn.recv(1):
            os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, daemon=True).start()
    status = 0
    try:
        runpy.run_path(request["script"], run_name="__main__")
    except SystemExit as exc:
        status = _exit_status(exc)
        if exc.code is not None and not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)  # as the interpreter does with sys.exit("why")
    except BaseException:  # the script's own uncaught error: logged as a script's would be
        sys.excepthook(*sys.exc_info())
        status = 1
    usage = resource.getrusage(resource.RUSAGE_SELF)
    logging.getLogger("vqarobust.warm").info(
        "warm child: %.1f s CPU, peak %d KiB (forked from the warm process)",
        usage.ru_utime + usage.ru_stime, usage.ru_maxrss,
    )  # fmt: skip
    # What the interpreter does on its way out: wait for the script's non-daemon threads,
    # then the exit handlers (the warm process registers none of its own; those of the
    # libraries it imported are theirs to run in every process that exits).
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    _send(conn, {"exit": status})
    os._exit(status)


def serve(path: Path, parent: int) -> None:
    """The warm process of the run with pid ``parent``: import :data:`PRELOAD`, then fork
    a child per job until the run ends or terminates it. Where it cannot serve, it says
    why and ends: the run's jobs then run cold."""
    try:
        _serve(path, parent)
    finally:
        for done in (ready_path(path), path, pid_path(path)):
            done.unlink(missing_ok=True)
        _reap(block=True)


def _serve(path: Path, parent: int) -> None:
    environment = dict(os.environ)
    code = package_digest()  # before the imports: an edit while they run sends jobs cold
    for name in PRELOAD:
        try:
            importlib.import_module(name)
        except Exception as exc:  # that job imports it itself (and fails there if it must)
            print(f"vqarobust.warm: not preloaded: {name}: {exc}", file=sys.stderr)
    # fork() copies one thread. The imports leave a few of their libraries' own (OpenBLAS's
    # and jemalloc's, which fork through at-fork handlers; polars' spill cleaner); the warm
    # process computes nothing, so no worker pool (OpenMP, polars, torch's) exists to copy.
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    path.unlink(missing_ok=True)
    listener.bind(str(path))
    listener.listen(64)
    listener.settimeout(1.0)
    ready = ready_path(path)
    tmp = ready.with_name(ready.name + f".tmp-{os.getpid()}")
    tmp.write_text(json.dumps({"pid": os.getpid(), "code": code}))
    os.replace(tmp, ready)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while os.getppid() == parent:  # the run gone (killed): so is its warm process
        _reap()
        try:
            conn, _ = listener.accept()
        except TimeoutError:
            continue
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            try:
                _run_child(conn, environment)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(1)
        conn.close()


def _reap(block: bool = False) -> None:
    """Collect ended children (their resource use then counts as this process's)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, 0 if block else os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]))
