"""Released detector features (GQA's h5 + info file, LXMERT's obj36 TSV) read per image,
and the IoU matching of detections to scene-graph objects, on files written here in the
official layouts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from vqarobust.features.matching import iou, match_detections
from vqarobust.features.released import GqaObjects, encode_obj36_line, read_obj36


def test_gqa_h5_files_are_read_per_image(tmp_path):
    import h5py

    rng = np.random.default_rng(0)
    slots = {}
    for index in (0, 1):
        boxes = rng.uniform(0, 50, size=(3, 100, 4)).astype(np.float32)
        features = rng.normal(size=(3, 100, 16)).astype(np.float32)
        with h5py.File(tmp_path / f"gqa_objects_{index}.h5", "w") as f:
            f["bboxes"], f["features"] = boxes, features
        slots[index] = (boxes, features)
    info = {
        "2370799": {"width": 500, "height": 375, "objectsNum": 7, "idx": 2, "file": 1},
        "n161313": {"width": 640, "height": 480, "objectsNum": 2, "idx": 0, "file": 0},
        "999": {"width": 10, "height": 10, "objectsNum": 1, "idx": 0, "file": 5},
    }
    (tmp_path / "gqa_objects_info.json").write_text(json.dumps(info))
    with GqaObjects(tmp_path / "gqa_objects_info.json", tmp_path) as gqa:
        det = gqa.read("2370799")
        np.testing.assert_array_equal(det.features, slots[1][1][2, :7])
        np.testing.assert_array_equal(det.boxes, slots[1][0][2, :7])
        np.testing.assert_allclose(
            det.normalized_boxes()[0], slots[1][0][2, 0] / [500, 375, 500, 375], rtol=1e-6
        )
        assert gqa.read("n161313").features.shape == (2, 16) and "n161313" in gqa
        assert list(gqa._files) == [1, 0]  # each file opened when first needed
        with pytest.raises(KeyError, match="no image '1'"):
            gqa.read("1")
        with pytest.raises(FileNotFoundError, match="gqa_objects_5.h5"):
            gqa.read("999")


def test_obj36_tsv_lines_are_decoded_only_when_wanted(tmp_path):
    rng = np.random.default_rng(1)
    boxes = {
        i: rng.uniform(0, 99, size=(n, 4)).astype(np.float32) for i, n in (("a1", 3), ("b2", 36))
    }
    feats = {i: rng.normal(size=(len(b), 8)).astype(np.float32) for i, b in boxes.items()}
    path = tmp_path / "val2014_obj36.tsv"
    path.write_text(
        "".join(encode_obj36_line(i, 100, 80, boxes[i], feats[i]) for i in boxes) + "bad\tline\n"
    )
    got = read_obj36(path, ["b2"])
    assert list(got) == ["b2"] and got["b2"].width == 100 and got["b2"].height == 80
    np.testing.assert_array_equal(got["b2"].features, feats["b2"])
    np.testing.assert_array_equal(got["b2"].boxes, boxes["b2"])
    assert read_obj36(path, ["zz"]) == {}
    with pytest.raises(ValueError, match="2 fields, expected 10"):
        read_obj36(path, ["bad"])


def test_detections_match_scene_graph_objects_at_iou_one_half():
    objects = np.array([[0, 0, 10, 10], [20, 20, 40, 40]], float)
    detections = np.array(
        [
            [0, 0, 10, 10],  # the first object exactly: IoU 1
            [0, 0, 10, 20],  # IoU 100 / 200 = 0.5: matched (the threshold is inclusive)
            [0, 0, 10, 21],  # IoU 100 / 210 < 0.5: left alone
            [25, 25, 40, 40],  # IoU 225 / 400 with the second
            [100, 100, 110, 110],
        ],
        float,
    )
    np.testing.assert_allclose(iou(detections[:2], objects), [[1.0, 0.0], [0.5, 0.0]])
    assert match_detections(detections, objects, ["o1", "o2"]) == ["o1", "o1", None, "o2", None]
    assert match_detections(detections, np.zeros((0, 4)), []) == [None] * 5


def test_relevant_objects_come_from_the_program_and_the_annotations():
    from vqarobust.datasets.gqa_graphs import graph_objects, relevant_objects

    entry = {
        "question": "Is the cup to the left of the plate on the table?",
        "semantic": [
            {"operation": "select", "dependencies": [], "argument": "table (722318)"},
            {"operation": "relate", "dependencies": [0], "argument": "plate,on,s (722310,722311)"},
            {"operation": "select", "dependencies": [], "argument": "cup (-)"},
            {"operation": "verify", "dependencies": [1, 2], "argument": "left"},
        ],
        "annotations": {
            "question": {"3": "722300", "6:8": "722310"},
            "answer": {},
            "fullAnswer": {"1": "722300,722301"},
        },
    }
    assert relevant_objects(entry) == {"722318", "722310", "722311", "722300", "722301"}
    assert relevant_objects({"semantic": [], "annotations": {}}) == set()
    graph = {
        "width": 100,
        "height": 80,
        "objects": {
            "722318": {
                "name": "table",
                "x": 0,
                "y": 40,
                "w": 100,
                "h": 40,
                "attributes": ["wooden"],
                "relations": [],
            },
            "722300": {"name": "cup", "x": 10, "y": 30, "w": 8, "h": 10, "attributes": []},
        },
    }
    objects = graph_objects(graph)
    assert [(o.id, o.name, o.attributes, o.box) for o in objects] == [
        ("722300", "cup", (), (10.0, 30.0, 18.0, 40.0)),
        ("722318", "table", ("wooden",), (0.0, 40.0, 100.0, 80.0)),
    ]
