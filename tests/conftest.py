"""Shared fixtures (tiny prepared easy-VQA splits and checkpoints, the tiny workflow run
shared by both workers, a hand-written results database, a simulated study), the helpers
that install Debian packages and run the workflow, and the order in which the workers
take the test files. Helpers without a fixture live in their own modules of tests/."""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Rough seconds a test file holds its worker: its heaviest mark's run (one per file: the
# whole-study files share it among their tests through a module fixture) plus a few
# seconds per marked test. The costliest files go first: pytest-xdist's own order (files
# with the most tests first, `--loadscope-reorder`) would start the one-test whole-study
# files last, leaving one worker alone at the end.
MARK_SECONDS = {"slurm": 240, "slow": 150, "workflow": 60}
PER_MARKED_TEST = 5


def file_seconds(items: list[pytest.Item]) -> int:
    """A test file's rough cost from its tests' marks (``MARK_SECONDS``), or its module's
    ``COST_SECONDS`` where it says more (an unmarked file of many slow unit tests, which
    would otherwise run last and leave the other worker idle)."""
    costs = [max((MARK_SECONDS.get(m.name, 0) for m in i.iter_markers()), default=0) for i in items]
    marked = max(costs, default=0) + PER_MARKED_TEST * sum(c > 0 for c in costs)
    modules = [getattr(i, "module", None) for i in items]
    declared = max((getattr(m, "COST_SECONDS", 0) for m in modules if m), default=0)
    return max(marked, declared)


def pytest_sessionstart(session: pytest.Session) -> None:
    """The package's bytecode written once, before the workers start (in the process that
    starts them, or the only one): where ``PYTHONDONTWRITEBYTECODE`` is set, as on this
    project's machines, no process writes it, and each of the suite's 600-odd Python
    processes (workers, Snakemake runs, their jobs) would compile the package's modules
    from source again (docs/testing.md, "Where the suite's time goes")."""
    if not hasattr(session.config, "workerinput"):
        compileall.compile_dir(REPO / "src" / "vqarobust", quiet=2)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Costliest files first (``file_seconds``), each file's tests kept together and in
    their order: with ``--dist loadfile --no-loadscope-reorder`` the workers take files in
    this order, so the long ones start early and the short ones fill the end."""
    by_file: dict[Path, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.path, []).append(item)
    cost = {path: file_seconds(group) for path, group in by_file.items()}
    items[:] = [i for path in sorted(by_file, key=lambda p: -cost[p]) for i in by_file[path]]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where lmms-eval's test is selected, its venv starts building now, in a thread
    (tests/harness_venv.py): the download overlaps the tests that run before it."""
    if any(item.path.name == "test_lmms_eval.py" for item in session.items):
        from tests.harness_venv import build_in_background

        build_in_background()


def _prepare(root: Path, split: str, n_images: int) -> dict[str, Path]:
    from vqarobust.datasets import PreparedOutputs, prepare_dataset

    out = {
        "questions": root / "questions.parquet",
        "images": root / "images",
        "manifest": root / "manifest.txt",
        "info": root / "dataset.json",
    }
    prepare_dataset(
        "easy-vqa",
        PreparedOutputs(out["questions"], out["images"], out["manifest"], out["info"]),
        split=split,
        n_images=n_images,
        seed=0,
    )
    return out


@pytest.fixture(scope="session")
def easy_vqa_eval(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Six test-split images of easy-VQA with all their questions."""
    return _prepare(tmp_path_factory.mktemp("easy_vqa_eval"), "test", 6)


@pytest.fixture(scope="session")
def easy_vqa_train(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Forty train-split images of easy-VQA, for a few training steps."""
    return _prepare(tmp_path_factory.mktemp("easy_vqa_train"), "train", 40)


@pytest.fixture(scope="session")
def checkpoints(easy_vqa_train, tmp_path_factory):
    """Tiny ViLT, CNN+BoW and CNN+FiLM checkpoints trained for a few steps, in HF format."""
    from vqarobust.models.recipe import Recipe
    from vqarobust.models.training import train_reference_model

    root = tmp_path_factory.mktemp("ckpt")
    out = {}
    for key, arch, kw in (
        ("vilt", "vilt", {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2}),
        ("cnn-bow", "cnn-bow", {"channels": [4, 8], "hidden_dim": 16}),
        (
            "cnn-film",
            "cnn-bow",
            {
                "channels": [4, 8],
                "hidden_dim": 16,
                "fusion": "film",
                "film_blocks": 1,
                "first_stride": 2,
            },
        ),
    ):
        stats = train_reference_model(
            str(easy_vqa_train["questions"]),
            str(easy_vqa_train["images"]),
            root / key,
            Recipe.of(arch, epochs=0.5, batch_size=32, **kw),
        )
        assert stats["steps"] >= 1
        out[key] = root / key
    return out


@pytest.fixture()
def database(tmp_path, easy_vqa_eval) -> tuple[Path, dict, int]:
    """A results database of two models ("good" loses 0.05 of accuracy per severity, "bad"
    0.15) on the clean images and two corruptions at severities 1-5: its path, its table
    counts and the number of questions."""
    from tests.predictions import write_predictions
    from vqarobust import store
    from vqarobust.db import DatabaseInputs, build_database

    questions = store.read_questions(easy_vqa_eval["questions"]).to_pylist()
    paths = []
    for model, slope in (("good", 0.05), ("bad", 0.15)):
        paths.append(write_predictions(tmp_path, questions, model, "clean", [0], lambda s: 0.9))
        for corruption in ("snow", "blur"):
            paths.append(
                write_predictions(
                    tmp_path,
                    questions,
                    model,
                    corruption,
                    [1, 2, 3, 4, 5],
                    lambda s, k=slope: 0.9 - k * s,
                )
            )
    db = tmp_path / "robustness.duckdb"
    counts = build_database(
        db,
        DatabaseInputs(easy_vqa_eval["questions"], paths),
        families={"snow": "weather", "blur": "blur"},
    )
    return db, counts, len(questions)


@pytest.fixture(scope="module")
def simulated_run() -> tuple:
    """The simulated study of tests/simulated_study.py: its questions, scored answers and
    uncertainty tables. Built once per module that reads it, as when it was imported."""
    from tests.simulated_study import simulated_run

    return simulated_run()


@pytest.fixture(scope="session")
def workflow_run(tmp_path_factory, wordnet) -> tuple[Path, dict]:
    """The tiny config (tests/data/tiny_config.yaml) run once for the whole test session,
    in a folder both pytest-xdist workers see: the first to ask builds it under a file
    lock, the other waits and reuses it (tests/test_workflow.py reads and copies it; the
    SLURM test compares its cluster run with it). Tests run changes on a copy; the plan
    tests of tests/test_workflow.py swap its config file for a dry run and put it back."""
    import fcntl

    import yaml

    config = yaml.safe_load((REPO / "tests" / "data" / "tiny_config.yaml").read_text())
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the session's folder, above each worker's own
    workdir, done = shared / "tiny-run", shared / "tiny-run.done"
    with (shared / "tiny-run.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(workdir, ignore_errors=True)  # a failed build of the other worker
            workdir.mkdir()
            run_workflow(workdir, config)
            done.touch()
    return workdir, config


@pytest.fixture(scope="session")
def wordnet() -> Path:
    """WordNet 3.0 for the synonym-based text perturbations: Debian's wordnet-base,
    installed here when absent and the tests run as root (as for SLURM); else skipped."""
    from vqarobust.text.wordnet import PACKAGE, wordnet_dir

    can_install = os.geteuid() == 0 and shutil.which("apt-get")
    if wordnet_dir() is None and can_install and apt_get("install", "-y", "-q", PACKAGE).returncode:
        apt_get("update", "-q")
        apt_get("install", "-y", "-q", PACKAGE)
    folder = wordnet_dir()
    if folder is None:
        pytest.skip(f"WordNet 3.0 is absent and cannot be installed here (Debian {PACKAGE})")
    return folder


# The test workers (pytest -n 2) may install Debian packages at the same time: apt holds
# one lock and fails at once on a held one, so every apt-get of the tests waits on this.
APT_LOCK = "/tmp/vqarobust-apt.lock"


def apt_get(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """``apt-get *args`` (non-interactive) after the tests' apt lock is free."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(
        ["flock", APT_LOCK, "apt-get", *args], capture_output=True, env=env, timeout=timeout
    )


def chromium() -> str:
    """Debian's chromium, installed when absent and possible; else the test is skipped
    (at the point it asks, so that what it checked before still counts)."""
    path = shutil.which("chromium")
    if path is None and os.geteuid() == 0 and shutil.which("apt-get"):
        apt_get("update", "-qq")
        apt_get("install", "-y", "-qq", "chromium")
        path = shutil.which("chromium")
    if path is None:
        pytest.skip("Debian's chromium is not installed and cannot be installed here")
    return path


def run_workflow(workdir: Path, config: dict, *targets: str, timeout: int = 900) -> None:
    """Write ``config`` as the workdir's config/config.yaml and run the workflow there on
    2 cores, to ``targets`` (a test that reads only the database need not pay for the
    report) or the whole of it; fail with the end of Snakemake's output."""
    import subprocess
    import sys

    import yaml

    (workdir / "config").mkdir(exist_ok=True)
    (workdir / "config" / "config.yaml").write_text(yaml.safe_dump(config))
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(workdir),
        "--cores",
        "2",
        *targets,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-5000:]
