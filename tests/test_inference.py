import polars as pl
import pytest

from vqarobust import store
from vqarobust.generate import corrupt_subset
from vqarobust.inference import Subset, run_inference


def test_one_job_answers_every_subset(checkpoints, easy_vqa_eval, tmp_path):
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow1", "snow", 1)
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow2", "snow", 2)
    out = tmp_path / "pred.parquet"
    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"]), "batch_size": 8}
    subsets = [
        Subset("snow", 1, str(tmp_path / "snow1")),
        Subset("snow", 2, str(tmp_path / "snow2")),
    ]
    n = run_inference("cnn", spec, easy_vqa_eval["questions"], subsets, out, device="cpu")
    df = pl.read_parquet(out)
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    assert n == df.height == 2 * n_q
    assert df.columns == store.PREDICTION_SCHEMA.names
    assert df.group_by("severity").len().sort("severity")["len"].to_list() == [n_q, n_q]
    assert set(df["model"]) == {"cnn"} and set(df["corruption"]) == {"snow"}
    assert df["answer"].null_count() == 0


def test_missing_images_fail_without_output(checkpoints, easy_vqa_eval, tmp_path):
    rows = list(store.iter_images(easy_vqa_eval["images"]))[:-1]
    store.write_image_shards(rows, tmp_path / "partial")
    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])}
    out = tmp_path / "pred.parquet"
    subsets = [Subset("clean", 0, str(tmp_path / "partial"))]
    with pytest.raises(ValueError, match="images asked about are missing"):
        run_inference("cnn", spec, easy_vqa_eval["questions"], subsets, out, device="cpu")
    assert not out.exists()
