import numpy as np
import pytest

from vqarobust import store
from vqarobust.materialize.images import corrupt_subset
from vqarobust.store import ImageStorage


def _by_id(directory):
    return {r["image_id"]: r for r in store.iter_images(directory)}


def test_corrupted_subset_does_not_depend_on_shard_layout(easy_vqa_eval, tmp_path):
    one = tmp_path / "one"
    many = tmp_path / "many"
    corrupt_subset(easy_vqa_eval["images"], one, "shot_noise", 3, global_seed=7)
    corrupt_subset(
        easy_vqa_eval["images"],
        many,
        "shot_noise",
        3,
        global_seed=7,
        storage=ImageStorage(shard_bytes=1),
    )
    assert len(store.image_shards(one)) == 1 and len(store.image_shards(many)) == 6
    a, b = _by_id(one), _by_id(many)
    assert a.keys() == b.keys()
    assert all(a[k]["bytes"] == b[k]["bytes"] for k in a)
    clean = _by_id(easy_vqa_eval["images"])
    for k, row in a.items():
        img = store.decode_image(row["bytes"])
        assert img.shape == store.decode_image(clean[k]["bytes"]).shape
        assert row["format"] == "png" and (row["width"], row["height"]) == (64, 64)


def test_jpeg_storage_and_seed_changes_output(easy_vqa_eval, tmp_path):
    corrupt_subset(
        easy_vqa_eval["images"], tmp_path / "j", "gaussian_noise", 1, storage=ImageStorage("jpeg")
    )
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "s1", "gaussian_noise", 1, global_seed=1)
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "s2", "gaussian_noise", 1, global_seed=2)
    rows = _by_id(tmp_path / "j")
    assert {r["format"] for r in rows.values()} == {"jpeg"}
    assert all(store.image_format_of(r["bytes"]) == "jpeg" for r in rows.values())
    s1, s2 = _by_id(tmp_path / "s1"), _by_id(tmp_path / "s2")
    k = next(iter(s1))
    a, b = store.decode_image(s1[k]["bytes"]), store.decode_image(s2[k]["bytes"])
    assert not np.array_equal(a, b)


def test_severity_out_of_range_is_rejected_before_writing(easy_vqa_eval, tmp_path):
    with pytest.raises(ValueError, match="severities 1..1"):
        corrupt_subset(easy_vqa_eval["images"], tmp_path / "g", "grayscale", 2)
    assert not (tmp_path / "g").exists()


def test_jpeg_corruption_stores_its_own_bytes(easy_vqa_eval, tmp_path):
    from vqarobust.corruptions import corrupt

    corrupt_subset(easy_vqa_eval["images"], tmp_path / "j", "jpeg_compression", 4)
    clean = _by_id(easy_vqa_eval["images"])
    for k, row in _by_id(tmp_path / "j").items():
        assert row["format"] == "jpeg" and store.image_format_of(row["bytes"]) == "jpeg"
        reference = corrupt(store.decode_image(clean[k]["bytes"]), "jpeg_compression", 4)
        # Decoding the stored file gives exactly the corruption's output: no second encode.
        assert np.array_equal(store.decode_image(row["bytes"]), reference)
