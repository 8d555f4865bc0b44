"""Dataset adapters for real formats: VQAv2 (folder and zip), generic JSONL, manifests and
the bad-image policy."""

from __future__ import annotations

import json
import zipfile

import polars as pl
import pytest

from vqarobust import store
from vqarobust.datasets import PreparedOutputs, prepare_dataset
from vqarobust.datasets.jsonl import read_jsonl
from vqarobust.datasets.miniature import image_name, write_mini_vqav2
from vqarobust.datasets.prepare import BadImagesError, read_manifest
from vqarobust.datasets.sources import open_images
from vqarobust.datasets.vqav2 import read_vqav2


def outputs(root):
    out = PreparedOutputs(
        root / "q.parquet", root / "images", root / "manifest.txt", root / "dataset.json"
    )
    return {"out": out}


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return write_mini_vqav2(tmp_path_factory.mktemp("mini"), n_images=12)


def test_vqav2_pairs_questions_and_annotations(mini):
    table = read_vqav2(mini["questions"], mini["annotations"])
    raw = json.loads(mini["annotations"].read_text())["annotations"]
    assert table.height == len(raw)
    row = table.filter(pl.col("question_id") == raw[0]["question_id"]).row(0, named=True)
    assert row["answers"] == [a["answer"] for a in raw[0]["answers"]]  # verbatim, "2 " too
    assert row["answer_type"] == raw[0]["answer_type"]
    assert row["question_type"] == raw[0]["question_type"]


def test_vqav2_names_ids_that_do_not_pair(mini, tmp_path):
    q = json.loads(mini["questions"].read_text())
    q["questions"] = q["questions"][2:] + [{"image_id": 1, "question": "?", "question_id": 77}]
    (tmp_path / "q.json").write_text(json.dumps(q))
    with pytest.raises(
        ValueError,
        match=r"1 question ids .* have no annotation \(e.g. \[77\]\).*"
        r"2 annotations .* have no question",
    ):
        read_vqav2(tmp_path / "q.json", mini["annotations"])
    q = json.loads(mini["questions"].read_text())
    q["questions"][0]["image_id"] += 1
    (tmp_path / "q.json").write_text(json.dumps(q))
    with pytest.raises(ValueError, match="1 question ids name different images"):
        read_vqav2(tmp_path / "q.json", mini["annotations"])
    (tmp_path / "bad.json").write_text(json.dumps({"anotations": []}))
    with pytest.raises(ValueError, match="no 'annotations' list at the top level"):
        read_vqav2(mini["questions"], tmp_path / "bad.json")


def test_folder_and_zip_give_the_same_dataset_with_original_bytes(mini, tmp_path):
    with zipfile.ZipFile(tmp_path / "val2014.zip", "w") as zf:
        for f in sorted(mini["images"].iterdir()):
            zf.write(f, f"val2014/{f.name}")
    kw = {
        "questions": str(mini["questions"]),
        "annotations": str(mini["annotations"]),
        "n_images": 5,
        "seed": 3,
    }
    a, b = tmp_path / "a", tmp_path / "b"
    prepare_dataset("vqav2", images=str(mini["images"]), **kw, **outputs(a))
    prepare_dataset("vqav2", images=str(tmp_path / "val2014.zip"), **kw, **outputs(b))
    assert pl.read_parquet(a / "q.parquet").equals(pl.read_parquet(b / "q.parquet"))
    rows = list(store.iter_images(b / "images"))
    assert len(rows) == 5 and [r["format"] for r in rows] == ["jpeg"] * 5
    for r in rows:
        assert r["bytes"] == (mini["images"] / image_name(r["image_id"])).read_bytes()
    assert read_manifest(a / "manifest.txt") == [r["image_id"] for r in rows]
    # Another seed draws other images.
    prepare_dataset(
        "vqav2", images=str(mini["images"]), **{**kw, "seed": 4}, **outputs(tmp_path / "c")
    )
    assert read_manifest(tmp_path / "c" / "manifest.txt") != read_manifest(a / "manifest.txt")


def test_bad_images_fail_naming_them_or_are_skipped_and_counted(mini, tmp_path):
    images = tmp_path / "imgs"
    images.mkdir()
    files = sorted(mini["images"].iterdir())
    for f in files[1:]:
        (images / f.name).write_bytes(f.read_bytes())
    (images / files[1].name).write_bytes(b"\xff\xd8broken")  # undecodable; files[0] missing
    ids = sorted(int(f.name[-16:-4]) for f in files)
    kw = {
        "questions": str(mini["questions"]),
        "annotations": str(mini["annotations"]),
        "images": str(images),
    }
    expected = (
        rf"2 of 12 chosen images .*{ids[0]} \(missing\), {ids[1]} \(does not decode"
        r".*on_bad_image: skip"
    )
    with pytest.raises(BadImagesError, match=expected):
        prepare_dataset("vqav2", **kw, **outputs(tmp_path / "fail"))
    assert not (tmp_path / "fail" / "images").exists()  # nothing half-written
    counts = prepare_dataset("vqav2", **kw, on_bad_image="skip", **outputs(tmp_path / "skip"))
    assert counts["skipped_images"] == 2 and counts["images"] == 10
    info = json.loads((tmp_path / "skip" / "dataset.json").read_text())
    assert [b["image_id"] for b in info["skipped_images"]] == ids[:2]
    # The reason is the same in every run: no memory address of PIL's stream in it.
    reason = info["skipped_images"][1]["reason"]
    assert reason.startswith("does not decode (UnidentifiedImageError") and " at 0x" not in reason
    assert info["n_skipped_questions"] > 0
    q = pl.read_parquet(tmp_path / "skip" / "q.parquet")
    assert not set(q["image_id"]) & set(ids[:2])


def test_manifest_selects_exactly_and_rejects_unknown_ids(mini, tmp_path):
    ids = read_vqav2(mini["questions"], mini["annotations"])["image_id"].unique().sort()
    manifest = tmp_path / "ids.txt"
    manifest.write_text(f"# my subset\n{ids[3]}\n\n{ids[1]}  # second\n")
    kw = {
        "questions": str(mini["questions"]),
        "annotations": str(mini["annotations"]),
        "images": str(mini["images"]),
    }
    prepare_dataset("vqav2", manifest=str(manifest), **kw, **outputs(tmp_path / "m"))
    assert read_manifest(tmp_path / "m" / "manifest.txt") == sorted([ids[1], ids[3]])
    manifest.write_text("5\n")
    with pytest.raises(
        ValueError, match=r"1 image ids have no questions in the dataset, e.g. \[5\]"
    ):
        prepare_dataset("vqav2", manifest=str(manifest), **kw, **outputs(tmp_path / "x"))
    manifest.write_text(f"{ids[0]}\n{ids[0]}\n")
    with pytest.raises(ValueError, match="line 2: image .* is listed twice"):
        read_manifest(manifest)
    manifest.write_text("abc\n")
    with pytest.raises(ValueError, match="line 1: 'abc' is not an image id"):
        read_manifest(manifest)


def test_image_sources_index_coco_names(tmp_path):
    (tmp_path / "COCO_val2014_000000000042.jpg").write_bytes(b"a")
    (tmp_path / "000000000043.jpg").write_bytes(b"b")
    (tmp_path / "notes.txt").write_text("x")
    with open_images(tmp_path) as source:
        assert source.ids() == {42, 43} and source.read(43) == b"b"
        with pytest.raises(FileNotFoundError):
            source.read(44)
    (tmp_path / "COCO_train2014_000000000042.jpg").write_bytes(b"c")
    with pytest.raises(ValueError, match="two image files for id 42"):
        open_images(tmp_path)
    with pytest.raises(FileNotFoundError, match="give a folder or a .zip archive"):
        open_images(tmp_path / "nope.zip")


def test_jsonl_adapter(tmp_path):
    from PIL import Image

    (tmp_path / "imgs").mkdir()
    for name, size in (("a.png", (40, 30)), ("b.jpg", (33, 50))):
        Image.new("RGB", size, (10, 200, 30)).save(tmp_path / "imgs" / name)
    lines = [
        {"image": "imgs/a.png", "question": "What color is it?", "answers": ["green"] * 3},
        {
            "image": "imgs/b.jpg",
            "question": "Is it green?",
            "answers": "yes",
            "question_id": 70,
            "answer_type": "yes/no",
        },
        {"image": "imgs/a.png", "question": "How many squares?", "answers": ["1", "one"]},
    ]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    table, files = read_jsonl(path)
    assert table["question_id"].to_list() == [0, 70, 2]
    assert table["image_id"].to_list() == [0, 1, 0] and files[1].name == "b.jpg"
    assert table["answers"].to_list()[1] == ["yes"]
    assert table["answer_type"].to_list() == ["other", "yes/no", "number"]
    assert table["question_type"].to_list() == ["what color is", "is it", "how many"]
    counts = prepare_dataset("jsonl", path=str(path), **outputs(tmp_path / "out"))
    assert counts == {"images": 2, "questions": 3, "skipped_images": 0}
    sizes = {
        r["image_id"]: (r["width"], r["height"])
        for r in store.iter_images(tmp_path / "out" / "images")
    }
    assert sizes == {0: (40, 30), 1: (33, 50)}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"line 1: not valid JSON"),
        ('{"image": "a.png", "question": "q"}', r"line 1: missing \['answers'\]"),
        ('{"image": "a.png", "question": "q", "answers": []}', "non-empty list of strings"),
        (
            '{"image": "a.png", "question": "q", "answers": "x", "question_id": "7"}',
            "question_id must be an integer",
        ),
    ],
)
def test_jsonl_errors_name_the_line(tmp_path, line, message):
    path = tmp_path / "d.jsonl"
    path.write_text(line + "\n")
    with pytest.raises(ValueError, match=message):
        read_jsonl(path)
    path.write_text('{"image": "a.png", "question": "q", "answers": "x", "question_id": 1}\n' * 2)
    with pytest.raises(ValueError, match="1 question ids occur more than once"):
        prepare_dataset("jsonl", path=str(path), **outputs(tmp_path / "o"))
