import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vqarobust import store


def _rows(n, size=32):
    rng = np.random.default_rng(0)
    for i in range(n):
        img = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
        yield {
            "image_id": i,
            "bytes": store.encode_image(img),
            "format": "png",
            "width": size,
            "height": size,
        }


def test_shards_are_sized_by_bytes_and_round_trip(tmp_path):
    rows = list(_rows(10))
    one = len(rows[0]["bytes"])
    n = store.write_image_shards(rows, tmp_path / "imgs", shard_bytes=3 * one)
    assert n == 10
    shards = store.image_shards(tmp_path / "imgs")
    assert 3 <= len(shards) <= 5
    back = list(store.iter_images(tmp_path / "imgs"))
    assert [r["image_id"] for r in back] == list(range(10))
    assert back[4]["bytes"] == rows[4]["bytes"]
    assert pq.read_schema(shards[0]).names == store.IMAGE_SCHEMA.names


def test_png_is_lossless_and_jpeg_is_close():
    img = np.random.default_rng(1).integers(0, 256, (40, 50, 3), dtype=np.uint8)
    assert (store.decode_image(store.encode_image(img, "png")) == img).all()
    smooth = np.tile(np.linspace(0, 255, 50, dtype=np.uint8)[None, :, None], (40, 1, 3))
    jpeg = store.decode_image(store.encode_image(smooth, "jpeg", 95))
    assert jpeg.shape == smooth.shape
    assert np.abs(jpeg.astype(int) - smooth).mean() < 2
    with pytest.raises(ValueError, match="unknown image format"):
        store.encode_image(img, "gif")


def test_atomic_path_leaves_nothing_on_failure(tmp_path):
    target = tmp_path / "out.parquet"
    with pytest.raises(RuntimeError), store.atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_failed_shard_writer_keeps_no_directory(tmp_path):
    def broken():
        yield from _rows(2)
        raise ValueError("bad image")

    with pytest.raises(ValueError, match="bad image"):
        store.write_image_shards(broken(), tmp_path / "imgs")
    assert not (tmp_path / "imgs").exists()


def test_write_table_replaces_atomically(tmp_path):
    path = tmp_path / "t.parquet"
    store.write_table(pa.table({"a": [1]}), path)
    store.write_table(pa.table({"a": [2, 3]}), path)
    assert pq.read_table(path).column("a").to_pylist() == [2, 3]
    # A write that fails (Parquet has no such type) leaves the last whole file, and no
    # temporary beside it; pq.write_table on the path itself would delete it.
    interval = pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval())
    with pytest.raises(pa.ArrowNotImplementedError):
        store.write_table(pa.table({"a": interval}), path)
    assert pq.read_table(path).column("a").to_pylist() == [2, 3]
    assert list(tmp_path.iterdir()) == [path]


def test_read_questions_checks_columns(tmp_path):
    path = tmp_path / "q.parquet"
    pq.write_table(pa.table({"question_id": [1], "question": ["why?"]}), path)
    with pytest.raises(ValueError, match="lacks columns"):
        store.read_questions(path)


def test_missing_shards_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no image shards"):
        store.image_shards(tmp_path)


def test_atomic_path_syncs_before_renaming(tmp_path, monkeypatch):
    """The new file's data and then its folder reach the disk; the rename comes between."""
    import os

    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(a, b):
        events.append(("replace", str(a), str(b)))
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    with store.atomic_path(tmp_path / "out.txt") as tmp:
        tmp.write_text("new")
    kinds = [e[0] for e in events]
    assert kinds == ["fsync", "replace", "fsync"]
    assert events[0][1].endswith(".out.txt.tmp-" + str(os.getpid()))
    assert events[2][1] == str(tmp_path)
    assert (tmp_path / "out.txt").read_text() == "new"


def test_replacing_a_directory_never_leaves_neither(tmp_path, monkeypatch):
    import os

    target = tmp_path / "shards"
    target.mkdir()
    (target / "a").write_text("old")
    real_replace = os.replace
    calls = []

    def replace(a, b):
        calls.append((str(a), str(b)))
        if len(calls) == 2:  # the new directory's rename in fails
            raise OSError("disk gone")
        real_replace(a, b)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="disk gone"), store.atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "a").write_text("new")
    # The old directory was renamed aside first, then put back when the new one failed.
    assert calls[0][1].endswith(".shards.old-" + str(os.getpid()))
    assert (target / "a").read_text() == "old"
    monkeypatch.setattr(os, "replace", real_replace)
    with store.atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "a").write_text("new")
    assert (target / "a").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["shards"]  # nothing left aside
