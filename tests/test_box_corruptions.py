"""The box-aware corruptions (docs/corruptions.md, "Box-aware corruptions"): object_crop
keeps every relevant box in its window, occlude_context never covers one; both without
boxes are their box-free siblings; the boxes tables of the three sources, by hand."""

from __future__ import annotations

import json

import cv2
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vqarobust import corruptions
from vqarobust.config import ConfigError, validate_config
from vqarobust.corruptions import box_shortfall, corrupt, corrupt_item, geometric, occlusion
from vqarobust.corruptions.boxes import covered, pixel_bounds
from vqarobust.corruptions.quality import ssim_psnr
from vqarobust.corruptions.samples import photo_like
from vqarobust.datasets import object_boxes
from vqarobust.store import QUESTION_SCHEMA

BOXED = ["object_crop", "occlude_context"]
SIBLING = {"object_crop": "zoom_crop", "occlude_context": "random_patches"}
SMALL = np.array([[20.0, 16.0, 44.0, 40.0]])  # one object of a 96x128 image


def test_registered_as_needing_boxes():
    assert [n for n in corruptions.names() if corruptions.needs(n) == "boxes"] == BOXED
    assert corruptions.family("object_crop") == "geometric"
    assert corruptions.family("occlude_context") == "occlusion"


def test_pixel_bounds_widen_to_whole_pixels_and_clip():
    boxes = np.array([[1.5, 2.2, 10.1, 8.0], [-5, -5, 3, 3], [50, 50, 60, 60], [7, 7, 7, 9]])
    assert pixel_bounds(boxes, 20, 30).tolist() == [[1, 2, 11, 8], [0, 0, 3, 3]]
    mask = covered(boxes, 20, 30)
    assert mask.sum() == 10 * 6 + 3 * 3 - 2 * 1 and mask[2, 1] and not mask[8, 5]  # overlap 2x1


@pytest.mark.parametrize("name", BOXED)
def test_without_boxes_each_is_its_box_free_sibling(name):
    image = photo_like(96, 128, 0)
    for boxes in (None, np.zeros((0, 4))):
        for s in range(1, 6):
            assert np.array_equal(
                corrupt(image, name, s, 5, boxes=boxes), corrupt(image, SIBLING[name], s, 5)
            )


@pytest.mark.parametrize("name", BOXED)
def test_ssim_falls_over_the_five_severities(name):
    images = [photo_like(96, 128, seed) for seed in range(3)]
    ssim = [
        np.mean(
            [
                ssim_psnr(im, corrupt(im, name, s, seed=k, boxes=SMALL))[0]
                for k, im in enumerate(images)
            ]
        )
        for s in range(1, 6)
    ]
    assert all(a > b for a, b in zip(ssim, ssim[1:], strict=False)), (name, ssim)


@pytest.mark.parametrize("name", BOXED)
def test_deterministic_per_item(name):
    image = photo_like(64, 80, 1)
    box = np.array([[30.0, 20.0, 40.0, 30.0]])
    a = corrupt_item(image, name, 3, 7, "img-1", boxes=box)
    assert np.array_equal(a, corrupt_item(image.copy(), name, 3, 7, "img-1", boxes=box.copy()))
    others = [corrupt_item(image, name, 3, 7, f"img-{i}", boxes=box) for i in range(2, 8)]
    assert any(not np.array_equal(a, o) for o in others)


boxes_st = st.lists(
    st.tuples(st.integers(0, 70), st.integers(0, 50), st.integers(1, 40), st.integers(1, 40)),
    min_size=1,
    max_size=4,
).map(lambda b: np.array([[x, y, x + w, y + h] for x, y, w, h in b], float))


@settings(max_examples=60, deadline=None)
@given(boxes=boxes_st, severity=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_the_crop_window_holds_every_box(boxes, severity, seed):
    h, w = 64, 96
    b = pixel_bounds(boxes, h, w)
    x, y, cw, ch = geometric.crop_window(h, w, severity, boxes, np.random.default_rng(seed))
    assert x >= 0 and y >= 0 and x + cw <= w and y + ch <= h
    assert (b[:, 0] >= x).all() and (b[:, 2] <= x + cw).all()
    assert (b[:, 1] >= y).all() and (b[:, 3] <= y + ch).all()
    keep = geometric.ZOOM_KEEP[severity - 1]
    # At least the severity's share of each side; widened only as far as the objects need.
    assert ch >= round(keep * h) and cw >= round(keep * w)
    widened = geometric.crop_size(h, w, severity, boxes)[2]
    if not widened:
        assert (ch, cw) == (round(keep * h), round(keep * w))


def test_object_crop_is_its_window_resized_by_opencv():
    image = photo_like(96, 128, 3)
    for seed in range(3):
        x, y, cw, ch = geometric.crop_window(96, 128, 4, SMALL, np.random.default_rng(seed))
        expected = cv2.resize(
            image[y : y + ch, x : x + cw], (128, 96), interpolation=cv2.INTER_LINEAR
        )
        out = geometric.object_crop(image, 4, np.random.default_rng(seed), boxes=SMALL)
        assert np.array_equal(out, expected)


def test_a_crop_widened_for_wide_objects_is_reported():
    wide = np.array([[0.0, 10.0, 120.0, 20.0]])  # 120 of 128 pixels wide
    assert geometric.crop_size(96, 128, 5, wide) == (90, 120, True)
    assert box_shortfall("object_crop", 96, 128, 5, wide) == "window widened to hold the objects"
    assert box_shortfall("object_crop", 96, 128, 5, SMALL) is None
    assert box_shortfall("object_crop", 96, 128, 5, None) == "no box data"
    assert box_shortfall("occlude_context", 96, 128, 5, np.zeros((0, 4))) == "no relevant object"
    outside = np.array([[200.0, 10.0, 220.0, 20.0]])
    reason = box_shortfall("object_crop", 96, 128, 5, outside)
    assert reason == "no relevant object inside the image"


@settings(max_examples=60, deadline=None)
@given(boxes=boxes_st, severity=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_occlusion_never_covers_a_relevant_box(boxes, severity, seed):
    image = photo_like(64, 96, seed % 3)
    out = occlusion.occlude_context(image, severity, np.random.default_rng(seed), boxes=boxes)
    inside = covered(boxes, 64, 96)
    assert np.array_equal(out[inside], image[inside])
    hidden = (out != image).any(axis=2).mean()
    assert hidden <= occlusion.AREA[severity - 1] + 1e-9


def test_free_positions_by_brute_force():
    boxes = np.array([[3.0, 2.0, 7.0, 5.0], [10.0, 8.0, 12.0, 12.0]])
    mask = covered(boxes, 14, 16)
    for sh, sw in ((1, 1), (3, 2), (4, 5)):
        free = [
            y * (16 - sw + 1) + x
            for y in range(14 - sh + 1)
            for x in range(16 - sw + 1)
            if not mask[y : y + sh, x : x + sw].any()
        ]
        assert occlusion.free_positions(14, 16, sh, sw, boxes).tolist() == free


def test_no_room_outside_the_objects_leaves_the_image_and_says_so():
    image = photo_like(64, 64, 0)
    everything = np.array([[0.0, 0.0, 64.0, 64.0]])
    out = corrupt(image, "occlude_context", 5, 1, boxes=everything)
    assert np.array_equal(out, image)
    assert box_shortfall("occlude_context", 64, 64, 5, everything).startswith("no room")


def _questions(rows: list[tuple[int, int, str, list[str]]]) -> pa.Table:
    return pa.table(
        {
            "question_id": [r[0] for r in rows],
            "image_id": [r[1] for r in rows],
            "question": [r[2] for r in rows],
            "answers": [r[3] for r in rows],
            "question_type": ["what"] * len(rows),
            "answer_type": ["other"] * len(rows),
        },
        schema=QUESTION_SCHEMA,
    )


def test_coco_boxes_by_hand(tmp_path):
    """Image 1: a dog (named by an answer's synonym-free name), a person (named by the
    synonym "man") and a car nobody names; image 2 has no instances; image 3's question
    names nothing annotated."""
    instances = {
        "categories": [
            {"id": 1, "name": "person"},
            {"id": 2, "name": "dog"},
            {"id": 3, "name": "car"},
        ],
        "annotations": [
            {
                "id": 10,
                "image_id": 1,
                "category_id": 2,
                "bbox": [5, 6, 10, 20],
                "area": 200,
                "iscrowd": 0,
            },
            {
                "id": 11,
                "image_id": 1,
                "category_id": 1,
                "bbox": [30, 5, 10, 10],
                "area": 100,
                "iscrowd": 0,
            },
            {
                "id": 12,
                "image_id": 1,
                "category_id": 3,
                "bbox": [50, 50, 4, 4],
                "area": 16,
                "iscrowd": 1,
            },
            {
                "id": 13,
                "image_id": 3,
                "category_id": 3,
                "bbox": [0, 0, 8, 8],
                "area": 64,
                "iscrowd": 0,
            },
        ],
    }
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(instances))
    questions = _questions(
        [
            (100, 1, "What is the man holding?", ["leash"]),
            (101, 1, "What animal is it?", ["dog", "dog"]),
            (200, 2, "Is it sunny?", ["yes"]),
            (300, 3, "What colour is the sky?", ["blue"]),
        ]
    )
    table = object_boxes.coco_boxes(questions, path)
    assert table.schema == object_boxes.BOX_SCHEMA
    assert table.select(["image_id", "object_id", "relevant"]).to_pylist() == [
        {"image_id": 1, "object_id": "10", "relevant": True},
        {"image_id": 1, "object_id": "11", "relevant": True},
        {"image_id": 1, "object_id": "12", "relevant": False},
        {"image_id": 3, "object_id": "13", "relevant": False},
    ]
    assert table.slice(0, 1).select(["x0", "y0", "x1", "y1"]).to_pylist() == [
        {"x0": 5.0, "y0": 6.0, "x1": 15.0, "y1": 26.0}
    ]
    kept = object_boxes.relevant_boxes(table)
    assert sorted(kept) == [1, 3] and kept[1].tolist() == [[5, 6, 15, 26], [30, 5, 40, 15]]
    assert kept[3].shape == (0, 4)  # boxes, none relevant; image 2: no box data at all
    # A set where no question names an annotated object: every image, no relevant box.
    none = object_boxes.relevant_boxes(table.filter(pc.equal(table["image_id"], 3)))
    assert list(none) == [3] and none[3].shape == (0, 4)


def test_gqa_boxes_follow_the_reasoning_steps():
    entries = {
        "7": {
            "imageId": "n5",
            "question": "What is on the table?",
            "answer": "cup",
            "semantic": [{"argument": "table (1)"}, {"argument": "_ (2)"}],
            "annotations": {"answer": {"0": "2"}},
        },
        "8": {
            "imageId": "n5",
            "question": "Is the lamp on?",
            "answer": "yes",
            "semantic": [{"argument": "lamp (3)"}],
        },
    }
    obj = {"name": "x", "x": 1, "y": 2, "w": 3, "h": 4}
    graphs = {"n5": {"objects": {"1": obj, "2": obj, "3": obj, "4": obj}}}
    from vqarobust.datasets.gqa import image_number

    questions = _questions([(7, image_number("n5"), "What is on the table?", ["cup"])])
    table = object_boxes.gqa_boxes(questions, entries, graphs)
    assert table["relevant"].to_pylist() == [True, True, False, False]
    assert table["x1"].to_pylist()[0] == 4.0 and table["y1"].to_pylist()[0] == 6.0


def test_scenes_boxes_are_the_objects_some_question_depends_on():
    from vqarobust.datasets import scenes

    objects = scenes.scene(0, "test", 3)
    asked = scenes.questions(0, "test", 3, objects)[:1]
    questions = _questions([(q.question_id, 3, q.text, [q.answer]) for q in asked])
    table = object_boxes.scenes_boxes(questions, 0, "test")
    assert table["object_id"].to_pylist() == [str(o.id) for o in objects]
    assert table["relevant"].to_pylist() == [o.id in asked[0].depends for o in objects]
    stray = _questions([(3 * scenes.ID_STRIDE + 15, 3, "?", ["x"])])
    with pytest.raises(ValueError, match="are not scenes questions of image 3"):
        object_boxes.scenes_boxes(stray, 0, "test")


def test_a_table_of_another_schema_is_refused(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"image_id": [1]}), tmp_path / "b.parquet")
    with pytest.raises(ValueError, match="not an object boxes table"):
        object_boxes.read_boxes(tmp_path / "b.parquet")


def test_the_config_refuses_them_without_boxes():
    models = {"m": {"family": "blip", "path_or_id": "x"}}
    base = {
        "dataset": {"name": "d", "adapter": "easy-vqa"},
        "corruptions": ["snow", "object_crop"],
        "models": models,
    }
    with pytest.raises(ConfigError, match=r"at corruptions\[1\]: 'object_crop' needs object boxes"):
        validate_config(base)
    vqav2 = {
        "dataset": {
            "name": "v",
            "adapter": "vqav2",
            "questions": "q.json",
            "annotations": "a.json",
            "images": "i",
        },
        "corruptions": ["occlude_context"],
        "models": models,
    }
    with pytest.raises(ConfigError, match="on vqav2 needs COCO's instance annotations"):
        validate_config(vqav2)
    scenes = {"dataset": {"name": "s", "adapter": "scenes"}, "corruptions": BOXED, "models": models}
    assert validate_config(scenes)["corruptions"] == BOXED
