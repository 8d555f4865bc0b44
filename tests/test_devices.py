import subprocess
import sys
import time

import pytest

from vqarobust.devices import NoGPUError, lease_device, visible_gpus


@pytest.fixture(autouse=True)
def _no_visible_devices_env(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def test_concurrent_leases_get_distinct_gpus_then_cpu(tmp_path):
    with lease_device(tmp_path, n_gpus=2) as a, lease_device(tmp_path, n_gpus=2) as b:
        assert {a, b} == {"cuda:0", "cuda:1"}
        with lease_device(tmp_path, n_gpus=2) as c:
            assert c == "cpu"
    with lease_device(tmp_path, n_gpus=2) as again:
        assert again == "cuda:0"  # released on exit


def test_no_gpu_means_cpu(tmp_path):
    with lease_device(tmp_path, n_gpus=0) as d:
        assert d == "cpu"


def test_existing_cuda_visible_devices_is_honoured(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    assert visible_gpus(n_gpus=2) == ["3", "5"]
    # A scheduler's CUDA_VISIBLE_DEVICES on a node where CUDA finds nothing: no GPU.
    assert visible_gpus(n_gpus=0) == []
    with lease_device(tmp_path, n_gpus=2) as a, lease_device(tmp_path, n_gpus=2) as b:
        assert (a, b) == ("cuda:0", "cuda:1")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-3.lock", "gpu-5.lock"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert visible_gpus(n_gpus=2) == []


def test_a_killed_job_releases_its_gpu(tmp_path):
    code = (
        "import sys, time\n"
        "from vqarobust.devices import lease_device\n"
        f"with lease_device({str(tmp_path)!r}, n_gpus=1) as d:\n"
        "    print(d, flush=True)\n"
        "    time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "cuda:0"
        with lease_device(tmp_path, n_gpus=1) as d:
            assert d == "cpu"  # held by the other process
    finally:
        proc.kill()
        proc.wait()
    time.sleep(0.1)
    with lease_device(tmp_path, n_gpus=1) as d:
        assert d == "cuda:0"


def test_device_cuda_never_falls_back_to_the_cpu(tmp_path):
    with (
        pytest.raises(NoGPUError, match=r"model 'llava' needs a GPU \(device: cuda\).*device: cpu"),
        lease_device(tmp_path, n_gpus=0, policy="cuda", who="model 'llava'"),
    ):
        pass
    with lease_device(tmp_path, n_gpus=1, policy="cuda") as held:
        assert held == "cuda:0"
        busy = lease_device(tmp_path, n_gpus=1, policy="cuda")
        with pytest.raises(NoGPUError, match="all 1 visible GPUs are leased"), busy:
            pass


def test_device_auto_falls_back_with_a_warning_and_cpu_never_leases(tmp_path, caplog):
    with lease_device(tmp_path, n_gpus=0, policy="auto") as d:
        assert d == "cpu"
    assert "running on the CPU (device: auto)" in caplog.text
    with lease_device(tmp_path, n_gpus=1, policy="cpu") as d:
        assert d == "cpu"
    assert not list(tmp_path.glob("gpu-*.lock"))
    with pytest.raises(ValueError, match="device must be one of"), lease_device(policy="gpu"):
        pass


def test_pretend_gpus_lease_distinct_ids_and_run_on_the_cpu(tmp_path, monkeypatch, caplog):
    """The test setting VQAROBUST_PRETEND_GPUS: the GPUs torch reports (n_gpus) do not
    count; each lease holds one of the pretend ids' locks, runs on the CPU and says so."""
    monkeypatch.setenv("VQAROBUST_PRETEND_GPUS", "2")
    caplog.set_level("INFO", logger="vqarobust.devices")
    with (
        lease_device(tmp_path, n_gpus=0, policy="cuda") as a,
        lease_device(tmp_path, n_gpus=0, policy="cuda") as b,
    ):
        assert (a, b) == ("cpu", "cpu")
        assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu-0.lock", "gpu-1.lock"]
        busy = lease_device(tmp_path, policy="cuda")
        with pytest.raises(NoGPUError, match="all 2 visible GPUs are leased"), busy:
            pass
    leased = [r.getMessage() for r in caplog.records if "GPU" in r.getMessage()]
    assert leased == [
        "leased pretend GPU 0 of 2 (VQAROBUST_PRETEND_GPUS, a test setting): running on the CPU",
        "leased pretend GPU 1 of 2 (VQAROBUST_PRETEND_GPUS, a test setting): running on the CPU",
        "released GPU 1",
        "released GPU 0",
    ]
    for bad in ("0", "two", "-1"):
        monkeypatch.setenv("VQAROBUST_PRETEND_GPUS", bad)
        wrong = pytest.raises(ValueError, match=f"VQAROBUST_PRETEND_GPUS must be .* not '{bad}'")
        with wrong, lease_device(tmp_path, policy="cuda"):
            pass
