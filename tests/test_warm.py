"""The warm process (vqarobust.warm) with real processes: a job script handed over runs in
a forked child with the job's directory, arguments, streams and thread count, and exits
with the child's status; a job whose environment differs, or whose package changed, runs
cold and says why; a killed job takes its child with it. The workflow tests run every
local run warm, and tests/test_workflow.py's fault campaign finishes one cold and
compares the tables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from vqarobust import warm

JOB = """
import os, sys, time
from vqarobust.warm import hand_over

hand_over()
import torch

print("child" if os.environ.get("VQAROBUST_WARM_CHILD") else "cold", os.getcwd(),
      torch.get_num_threads(), os.environ.get("TMPDIR"), sys.argv[1:], flush=True)
if sys.argv[1] == "raise":
    raise RuntimeError("the job's own error")
if sys.argv[1] == "sleep":
    open("pid", "w").write(str(os.getpid()))
    time.sleep(60)
sys.exit(int(sys.argv[1]))
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead; its parent (the warm process) reaps it within a second.
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(") ")[1][0] != "Z"


def test_a_job_runs_in_a_forked_child_and_cold_where_it_must(tmp_path, monkeypatch):
    monkeypatch.delenv(warm.ENV_SOCKET, raising=False)
    script = tmp_path / "job.py"
    script.write_text(JOB)
    work = tmp_path / "work"
    work.mkdir()
    proc = warm.start(tmp_path)
    monkeypatch.setenv(warm.ENV_SOCKET, os.environ[warm.ENV_SOCKET])
    try:

        def job(*args: str, **env: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, str(script), *args], cwd=work,
                                  env={**os.environ, **env}, capture_output=True, text=True,
                                  timeout=120)  # fmt: skip

        # The job's directory, arguments, stdout and exit status; its thread count and
        # temporary folder (set per job by Snakemake) applied in the child.
        out = job("3", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TMPDIR=str(tmp_path))
        assert out.returncode == 3, out.stderr
        assert out.stdout.split() == ["child", str(work), "1", str(tmp_path), "['3']"]
        assert job("0").returncode == 0
        # The script's own error: its traceback on the job's stderr, status 1.
        out = job("raise")
        assert out.returncode == 1 and out.stdout.startswith("child")
        assert "RuntimeError: the job's own error" in out.stderr
        # Another environment: cold, and why.
        out = job("0", SOME_SETTING="x")
        assert out.returncode == 0 and out.stdout.startswith("cold")
        assert "running cold: its environment differs from the warm process's in SOME_SETTING" in (
            out.stderr
        )
        # A killed job's child ends with it.
        client = subprocess.Popen([sys.executable, str(script), "sleep"], cwd=work,
                                  env=dict(os.environ), stdout=subprocess.DEVNULL)  # fmt: skip
        deadline = time.monotonic() + 60
        while not (work / "pid").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int((work / "pid").read_text())
        assert child != client.pid and _alive(child)
        client.send_signal(signal.SIGKILL)
        client.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        warm.stop(proc)
    assert proc.returncode is not None
    assert not warm.socket_path(tmp_path).exists()
    # A job of a run whose warm process has ended: cold at once, and why.
    ended = {**os.environ, warm.ENV_SOCKET: str(warm.socket_path(tmp_path))}
    out = subprocess.run([sys.executable, str(script), "0"], cwd=work, capture_output=True,
                         text=True, timeout=120, env=ended)  # fmt: skip
    assert out.stdout.startswith("cold") and "has ended" in out.stderr


def test_a_changed_package_runs_cold(tmp_path, monkeypatch, capsys):
    path = tmp_path / "x.sock"
    warm.ready_path(path).write_text(json.dumps({"pid": os.getpid(), "code": "other"}))
    monkeypatch.setenv(warm.ENV_SOCKET, str(path))
    monkeypatch.delenv(warm.ENV_CHILD, raising=False)
    warm.hand_over()  # returns: the job runs here
    assert "running cold: the package changed since the warm process imported it" in (
        capsys.readouterr().err
    )


def test_a_gpu_job_runs_cold_without_asking(tmp_path, monkeypatch, capsys):
    from types import SimpleNamespace

    monkeypatch.setenv(warm.ENV_SOCKET, str(tmp_path / "none.sock"))
    monkeypatch.delenv(warm.ENV_CHILD, raising=False)
    warm.hand_over(SimpleNamespace(resources=SimpleNamespace(gpu=1)))
    assert capsys.readouterr().err == ""
    warm.hand_over(SimpleNamespace(resources=SimpleNamespace(gpu=0)))  # asks, finds none
    assert "has ended" in capsys.readouterr().err


def test_messages_arrive_whole_and_in_order_with_their_descriptors():
    import socket

    a, b = socket.socketpair()
    with a, b, open(os.devnull) as devnull:
        warm._send(a, {"started": True})
        warm._send(a, {"exit": 3, "pad": "x" * 50_000})
        assert warm._receive(b) == ({"started": True}, [])
        assert warm._receive(b)[0]["exit"] == 3
        warm._send(a, {"env": {"A": "1"}}, [devnull.fileno()])
        message, fds = warm._receive(b, 1)
        assert message == {"env": {"A": "1"}} and len(fds) == 1
        os.close(fds[0])
        a.shutdown(socket.SHUT_WR)
        assert warm._receive(b) == (None, [])


def test_an_ended_process_is_ended_even_unreaped():
    zombie = subprocess.Popen(["true"])
    deadline = time.monotonic() + 10
    while not warm._ended(zombie.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert warm._ended(zombie.pid) and zombie.poll() == 0
    assert not warm._ended(os.getpid())


def test_no_warm_process_where_it_cannot_start(monkeypatch, capsys):
    import tempfile

    monkeypatch.delenv(warm.ENV_SOCKET, raising=False)
    with tempfile.NamedTemporaryFile(dir="/tmp") as file:  # a short path: no /tmp fallback
        proc = warm.start(file.name)  # no .snakemake folder can be made under a file
        warm.stop(proc)
    assert proc is None and "no warm process" in capsys.readouterr().err
    assert warm.ENV_SOCKET not in os.environ


def test_the_package_digest_covers_the_package_sources():
    assert warm.package_digest() == warm.package_digest()
    assert len(warm.package_digest()) == 64


@pytest.mark.parametrize("depth", [1, 40])
def test_the_socket_path_fits_a_unix_socket(tmp_path, depth):
    deep = tmp_path.joinpath(*["d" * 8] * depth)
    assert len(os.fsencode(warm.socket_path(deep))) < 100
