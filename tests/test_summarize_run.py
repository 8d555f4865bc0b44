import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "summarize_run.py"


@pytest.fixture(scope="module")
def summarize_run():
    spec = importlib.util.spec_from_file_location("summarize_run", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tsv(path: Path, seconds: float, rss: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:01\t{rss}\n")


def test_per_rule_and_per_model_sums_of_one_dataset(tmp_path, summarize_run):
    root = tmp_path / "out"
    _tsv(root / "easy-vqa" / "run_model" / "a" / "clean.tsv", 2.0, 100)
    _tsv(root / "easy-vqa" / "run_model" / "a" / "snow.tsv", 3.0, 120)
    _tsv(root / "easy-vqa" / "run_model" / "b.tsv", 1.5, 90)  # a job per model
    _tsv(root / "easy-vqa" / "image_attention" / "a.tsv", 0.5, 80)
    _tsv(root / "easy-vqa" / "load_duckdb.tsv", 4.0, 300)
    _tsv(root / "scenes" / "run_model" / "a" / "clean.tsv", 99.0, 1)  # another dataset
    rules = {r["rule"]: r for r in summarize_run.summarize(root, "easy-vqa").iter_rows(named=True)}
    assert rules["run_model"]["jobs"] == 3 and rules["run_model"]["job_seconds"] == 6.5
    assert rules["run_model"]["peak_rss_mb"] == 120 and rules["load_duckdb"]["jobs"] == 1
    models = summarize_run.per_model(root, "easy-vqa").rows(named=True)
    got = {(r["rule"], r["model"]): (r["jobs"], r["job_seconds"], r["slowest_job"]) for r in models}
    assert got == {
        ("image_attention", "a"): (1, 0.5, "a"),
        ("run_model", "a"): (2, 5.0, "snow"),
        ("run_model", "b"): (1, 1.5, "b"),
    }
    assert summarize_run.summarize(root)["jobs"].sum() == 6  # every dataset without --dataset
    with pytest.raises(SystemExit, match="no benchmark files"):
        summarize_run.summarize(root, "vqav2")
