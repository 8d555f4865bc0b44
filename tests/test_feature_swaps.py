"""Feature-level SwapMix: class neighbours with the 0.5 threshold and padding, swaps that
change exactly one row, donors of the right class and attributes, the k-prefix property,
and reliance at k by hand."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from vqarobust.context.feature_swaps import (
    FeatureSwap,
    FeatureSwapPlanner,
    QuestionContext,
    apply_swap,
    nearest_attribute_sets,
    nearest_classes,
)
from vqarobust.context.swapmix import scene_swaps
from vqarobust.datasets import scenes
from vqarobust.features.perfect_sight import encode_object, perfect_sight_table
from vqarobust.features.table import FeatureTable, feature_table
from vqarobust.metrics.context_paper import reliance_at_k


def unit(angle_deg: float) -> np.ndarray:
    a = np.radians(angle_deg)
    return np.array([np.cos(a), np.sin(a)], np.float32)


# Cosines with "a": b 0.9, c 0.6, h 0.5 (exactly the threshold), d 0.3, e 0.0.
VECTORS = {
    "a": unit(0),
    "b": unit(np.degrees(np.arccos(0.9))),
    "c": unit(np.degrees(np.arccos(0.6))),
    "h": unit(60),
    "d": unit(np.degrees(np.arccos(0.3))),
    "e": unit(90),
}


def test_nearest_classes_threshold_then_random_padding():
    rng = lambda: np.random.default_rng(7)  # noqa: E731
    classes = list(VECTORS)
    # Passing the 0.5 threshold (0.5 itself included), nearest first.
    assert nearest_classes("a", classes, VECTORS, 3, rng()) == ["b", "c", "h"]
    assert nearest_classes("a", classes, VECTORS, 1, rng()) == ["b"]
    # Fewer pass than k: the others pad, in a seeded random order.
    five = nearest_classes("a", classes, VECTORS, 5, rng())
    assert five[:3] == ["b", "c", "h"] and sorted(five[3:]) == ["d", "e"]
    assert nearest_classes("a", classes, VECTORS, 5, rng()) == five  # same seed, same order
    orders = {
        tuple(nearest_classes("a", classes, VECTORS, 5, np.random.default_rng(s)))[3:]
        for s in range(20)
    }
    assert orders == {("d", "e"), ("e", "d")}  # the padding really is random
    # More than there are: every other class once; a class is never its own neighbour.
    assert sorted(nearest_classes("a", classes, VECTORS, 10, rng())) == ["b", "c", "d", "e", "h"]
    # A higher threshold pads sooner; the prefix of a longer list is the shorter list.
    assert nearest_classes("a", classes, VECTORS, 2, rng(), threshold=0.95)[0] in "bchde"
    assert nearest_classes("a", classes, VECTORS, 4, rng())[:3] == nearest_classes(
        "a", classes, VECTORS, 3, rng()
    )


def test_nearest_attribute_sets_by_encoding():
    vocab = {"x": unit(0), "y": unit(30), "z": unit(90)}

    def enc(a):
        return np.mean([vocab[w] for w in a], axis=0)

    # ("x",) is nearest to itself (left out), then ("x", "y") at 15 deg, ("y",) 30, ...
    cands = [("x",), ("y",), ("z",), ("x", "y")]
    assert nearest_attribute_sets(("x",), cands, enc, 2) == [("x", "y"), ("y",)]
    assert nearest_attribute_sets(("x",), cands, enc, 9) == [("x", "y"), ("y",), ("z",)]


def bank() -> FeatureTable:
    """Three images; features are distinct per object (row value = 10 * image + index)."""
    objects = [
        (0, "circle", ("red", "small")),
        (0, "square", ("blue", "large")),
        (0, "star", ("green", "small")),
        (1, "square", ("red", "small")),
        (1, "square", ("green", "small")),
        (1, "star", ("blue", "large")),
        (2, "circle", ("blue", "large")),
        (2, "triangle", ("red", "small")),
    ]
    rows, counts = [], {}
    for image_id, cls, attrs in objects:
        i = counts.get(image_id, 0)
        counts[image_id] = i + 1
        rows.append(
            {
                "image_id": image_id,
                "object_index": i,
                "object_id": str(i),
                "box": [0.1 * i, 0.1, 0.1 * i + 0.1, 0.2],
                "class": cls,
                "attributes": list(attrs),
                "feature": [10.0 * image_id + i] * 3 + [float(i)],
            }
        )
    return FeatureTable(feature_table(rows))


SHAPE_VECTORS = {s: unit(15 * i) for i, s in enumerate(("circle", "square", "triangle", "star"))}


def test_a_feature_swap_changes_exactly_the_swapped_row_to_the_donors():
    b = bank()
    planner = FeatureSwapPlanner(b, SHAPE_VECTORS, k=3, seed=0)
    q = QuestionContext(1, 0, context=(1, 2), excluded_classes=frozenset({"triangle"}))
    swaps = planner.swaps(q, ["swap_class", "swap_attribute"])
    assert {s.perturbation for s in swaps} == {"swap_class", "swap_attribute"}
    clean = b.region_features(0)
    for sw in swaps:
        swapped = apply_swap(b, 0, sw)
        donor_row = b.matrix[b.row(*sw.donor)]
        np.testing.assert_array_equal(swapped.features[sw.object_index], donor_row)
        others = [i for i in range(len(clean.features)) if i != sw.object_index]
        np.testing.assert_array_equal(swapped.features[others], clean.features[others])
        np.testing.assert_array_equal(swapped.boxes, clean.boxes)  # boxes stay
        donor_class, donor_attrs = b.classes[b.row(*sw.donor)], b.attributes[b.row(*sw.donor)]
        own_class, own_attrs = b.classes[sw.object_index], b.attributes[sw.object_index]
        if sw.perturbation == "swap_class":
            assert donor_class != own_class and donor_class != "triangle"  # never mentioned
        else:
            assert donor_class == own_class and donor_attrs != own_attrs
    # Object 1 (a blue large square): the attribute swaps are the other squares; a class
    # swap to a circle takes a random circle (the paper's rule), its attributes with it.
    square = [s for s in swaps if s.object_index == 1]
    assert {s.donor for s in square if s.perturbation == "swap_attribute"} == {(1, 0), (1, 1)}
    assert planner.swaps(q, ["swap_class", "swap_attribute"]) == swaps  # seeded
    circles = {(0, 0): ("red", "small"), (2, 0): ("blue", "large")}
    donors = set()
    for qid in range(40):
        for s in planner.swaps(QuestionContext(qid, 0, context=(1,)), ["swap_class"]):
            if s.after_class == "circle":
                assert s.after_attributes == circles[s.donor]
                donors.add(s.donor)
    assert donors == set(circles)  # no preference for the square's own attributes
    # The earlier rule, a named option: the circle with the square's attributes.
    same = FeatureSwapPlanner(b, SHAPE_VECTORS, k=3, seed=0, class_attributes="same")
    assert FeatureSwap("swap_class", 1, 1, "circle", ("blue", "large"), (2, 0)) in same.swaps(
        q, ["swap_class"]
    )
    with pytest.raises(ValueError, match="class_attributes is one of"):
        FeatureSwapPlanner(b, SHAPE_VECTORS, k=3, seed=0, class_attributes="own")


def test_perfect_sight_swaps_re_encode_the_new_labels():
    names = ("red", "blue", "green", "small", "large")
    vocab = {**SHAPE_VECTORS, **{a: unit(40 + 7 * i) for i, a in enumerate(names)}}
    objects = [
        {
            "image_id": 0,
            "object_index": i,
            "object_id": str(i),
            "box": [0, 0, 1, 1],
            "class": c,
            "attributes": list(a),
        }
        for i, (c, a) in enumerate(
            [
                ("circle", ("red", "small")),
                ("square", ("blue", "large")),
                ("star", ("green", "small")),
            ]
        )
    ]
    b = FeatureTable(perfect_sight_table(objects, vocab), vocab)
    planner = FeatureSwapPlanner(b, SHAPE_VECTORS, k=2, seed=0, mode="labels")
    q = QuestionContext(5, 0, context=(1,), excluded_attributes=frozenset({"green"}))
    swaps = planner.swaps(q, ["swap_class", "swap_attribute"])
    # The 2 nearest of the bank's other classes (circle at 15 deg, star at 30 deg from the
    # square). The paper's rule: the new object takes the attributes of a random object of
    # its class (the only circle's); the only star is green, which the question names, so
    # there is no star to swap in.
    assert [
        (s.after_class, s.after_attributes) for s in swaps if s.perturbation == "swap_class"
    ] == [("circle", ("red", "small"))]
    # The earlier rule, a named option: class swaps keep the object's own attributes.
    same = FeatureSwapPlanner(b, SHAPE_VECTORS, k=2, seed=0, mode="labels", class_attributes="same")
    assert [(s.after_class, s.after_attributes) for s in same.swaps(q, ["swap_class"])] == [
        ("circle", ("blue", "large")),
        ("star", ("blue", "large")),
    ]
    for sw in swaps:
        assert sw.donor is None and "green" not in sw.after_attributes
        swapped = apply_swap(b, 0, sw)
        expected = encode_object(sw.after_class, sw.after_attributes, vocab)
        np.testing.assert_allclose(swapped.features[1], expected)
        np.testing.assert_array_equal(
            swapped.features[[0, 2]], b.region_features(0).features[[0, 2]]
        )
    # The row is [class vector, mean of the attribute vectors].
    expected = np.r_[vocab["square"], (vocab["blue"] + vocab["large"]) / 2]
    np.testing.assert_allclose(b.matrix[1], expected, rtol=1e-6)


def _key(s):
    return (s.perturbation, s.object_index, s.rank, s.after_class, s.after_attributes, s.donor)


def test_the_first_k_swaps_of_a_run_with_more_are_the_runs_with_k():
    b = bank()
    q = QuestionContext(3, 1, context=(0, 1, 2))
    big = FeatureSwapPlanner(b, SHAPE_VECTORS, k=5, seed=1).swaps(
        q, ["swap_class", "swap_attribute"]
    )
    for k in (1, 2, 3):
        small = FeatureSwapPlanner(b, SHAPE_VECTORS, k=k, seed=1).swaps(
            q, ["swap_class", "swap_attribute"]
        )
        assert {_key(s) for s in small} == {_key(s) for s in big if s.rank <= k}
    # The same for the pixel swaps of scenes (the shared rng is drawn alike for any k).
    neighbours = {s: [t for t in scenes.SHAPES if t != s] for s in scenes.SHAPES}
    for image_id in range(5):
        objects = scenes.scene(0, "test", image_id)
        for question in scenes.questions(0, "test", image_id, objects):
            run = {
                k: scene_swaps(objects, question, neighbours, k, np.random.default_rng(image_id))
                for k in (3, 7)
            }
            assert {(s.perturbation, s.object_id, s.changes) for s in run[3]} == {
                (s.perturbation, s.object_id, s.changes) for s in run[7] if s.rank <= 3
            }


def test_a_cap_on_the_objects_keeps_the_first_objects_swaps_exactly():
    """context.max_objects: None swaps every context object (the paper's rule); a cap of
    c swaps the first c (by row, by id on scenes), each exactly as without the cap."""
    rows = [
        {
            "image_id": 0,
            "object_index": i,
            "object_id": str(i),
            "box": [0, 0, 1, 1],
            "class": ("circle", "square", "star")[i % 3],
            "attributes": [("red", "blue", "green")[i // 3]],
            "feature": [float(i)] * 4,
        }
        for i in range(9)
    ]
    b = FeatureTable(feature_table(rows))
    q = QuestionContext(5, 0, context=tuple(range(1, 9)))  # row 0 is the question's
    kinds = ["swap_class", "swap_attribute"]
    every = FeatureSwapPlanner(b, SHAPE_VECTORS, k=2, seed=3).swaps(q, kinds)
    assert {s.object_index for s in every} == set(range(1, 9))  # more than the old cap of 6
    for cap in (1, 3, 6):
        capped = FeatureSwapPlanner(b, SHAPE_VECTORS, k=2, seed=3, max_objects=cap).swaps(q, kinds)
        assert {s.object_index for s in capped} == set(range(1, cap + 1))
        assert capped == [s for s in every if s.object_index <= cap]
    # Pixel swaps of scenes alike.
    neighbours = {s: [t for t in scenes.SHAPES if t != s] for s in scenes.SHAPES}
    several = 0
    for image_id in range(8):
        objects = scenes.scene(0, "test", image_id)
        for question in scenes.questions(0, "test", image_id, objects):
            all_ = scene_swaps(objects, question, neighbours, 2, np.random.default_rng(image_id))
            first = scene_swaps(
                objects, question, neighbours, 2, np.random.default_rng(image_id), max_objects=1
            )
            ids = [o.id for o in scenes.context_objects(objects, question)]
            assert {s.object_id for s in all_} <= set(ids)
            assert first == [s for s in all_ if s.object_id == ids[0]]
            several += len({s.object_id for s in all_}) > 1
    assert several  # the cap did drop objects somewhere


def test_reliance_at_k_by_hand():
    # q1 correct; it flips only under its rank-3 class swap. q2 correct; flips under its
    # rank-1 attribute swap. q3 wrong on the clean image.
    rows = [
        ("m", "clean", "clean", 0, 1, "red", 1.0),
        ("m", "clean", "clean", 0, 2, "yes", 1.0),
        ("m", "clean", "clean", 0, 3, "no", 0.0),
    ]
    ctx = [
        (1, "swap_class", 1, 1, "red"),
        (1, "swap_class", 2, 2, "red"),
        (1, "swap_class", 3, 3, "blue"),
        (1, "swap_attribute", 1, 1, "red"),
        (2, "swap_attribute", 1, 1, "no"),
        (2, "swap_class", 1, 1, "yes"),
        (3, "swap_class", 1, 1, "yes"),
    ]
    rows += [("m", "context", p, sev, q, a, float(a in ("red", "yes"))) for q, p, sev, _, a in ctx]
    scored = pl.DataFrame(
        rows,
        schema=["model", "modality", "perturbation", "severity", "question_id", "answer", "score"],
        orient="row",
    )
    scored = scored.with_columns(pl.col("severity").cast(pl.Int16))
    ranks = pl.DataFrame(
        [("m", q, p, sev, r) for q, p, sev, r, _ in ctx],
        schema=["model", "question_id", "perturbation", "severity", "rank"],
        orient="row",
    ).with_columns(pl.col("severity").cast(pl.Int16))
    table = reliance_at_k(scored, ranks, [1, 3])
    got = {
        (r["perturbation"], r["k"]): (r["n_correct"], r["n_changed"])
        for r in table.iter_rows(named=True)
    }
    assert got == {
        ("all", 1): (2, 1),
        ("all", 3): (2, 2),  # q2 at k=1; q1 too at k=3
        ("swap_class", 1): (2, 0),
        ("swap_class", 3): (2, 1),
        ("swap_attribute", 1): (2, 1),
        ("swap_attribute", 3): (2, 1),
    }
    with pytest.raises(ValueError, match="no swap"):
        reliance_at_k(scored, ranks.head(3), [1])


def test_the_planners_rankings_choose_what_the_reference_functions_would():
    """The planner ranks each class and attribute set once over the bank (GQA's size);
    with a question's exclusions it must choose exactly what nearest_classes and
    nearest_attribute_sets choose over the allowed candidates."""
    from vqarobust.seeding import item_rng

    rng = np.random.default_rng(3)
    classes = [f"c{i}" for i in range(12)]
    attrs = [f"a{i}" for i in range(5)]
    vocab = {n: rng.normal(size=4).astype(np.float32) for n in classes + attrs}
    objects = [
        {
            "image_id": i,
            "object_index": j,
            "object_id": str(j),
            "box": [0.0, 0.0, 0.1, 0.1],
            "class": str(rng.choice(classes)),
            "attributes": sorted(set(rng.choice(attrs, size=int(rng.integers(0, 3))))),
        }
        for i in range(12)
        for j in range(4)
    ]
    bank = FeatureTable(perfect_sight_table(objects, vocab), vocab)
    for mode, class_attributes in (("donor", "paper"), ("labels", "paper"), ("labels", "same")):
        planner = FeatureSwapPlanner(
            bank, vocab, 4, 7, mode, threshold=0.2, class_attributes=class_attributes
        )
        for qid in range(24):
            image = qid % 12
            q = QuestionContext(
                qid,
                image,
                (0, 1, 2, 3),
                frozenset(rng.choice(classes, 2)),
                frozenset(rng.choice(attrs, 1)),
            )
            for index in range(4):
                cls, own, _ = bank.labels(image)[index]
                row = bank.row(image, index)
                allowed = [c for c in planner.classes if c not in q.excluded_classes]
                draw = item_rng(7, "feature-swap", qid, index, "class")
                want = nearest_classes(cls, allowed, vocab, 4, draw, 0.2)
                got = [s.after_class for s in planner.class_swaps(q, row)]
                if class_attributes == "same" and mode == "labels":
                    assert got == want
                else:  # a class without an allowed object is skipped, the order kept
                    left = iter(want)
                    assert all(c in left for c in got)
                sets = [a for a in planner.attribute_sets if not set(a) & q.excluded_attributes]
                if mode == "labels":
                    expected = nearest_attribute_sets(own, sets, planner._encode_attributes, 4)
                else:
                    same = sorted(a for a in sets if a != own and (cls, a) in planner.by_labels)
                    draw = item_rng(7, "feature-swap", qid, index, "attribute")
                    expected = [same[i] for i in draw.permutation(len(same))][:4]
                assert [s.after_attributes for s in planner.attribute_swaps(q, row)] == expected


def _squares_bank() -> FeatureTable:
    """Image 0: a blue large square (the context object); image 1: three red small
    squares and a green small one (rows valued 10 * image + index)."""
    objects = [
        (0, ("blue", "large")),
        (1, ("red", "small")),
        (1, ("red", "small")),
        (1, ("red", "small")),
        (1, ("green", "small")),
    ]
    rows, counts = [], {}
    for image_id, attrs in objects:
        i = counts.get(image_id, 0)
        counts[image_id] = i + 1
        rows.append(
            {
                "image_id": image_id,
                "object_index": i,
                "object_id": str(i),
                "box": [0.0, 0.0, 0.1, 0.1],
                "class": "square",
                "attributes": list(attrs),
                "feature": [10.0 * image_id + i] * 2,
            }
        )
    return FeatureTable(feature_table(rows))


def test_attribute_swaps_draw_objects_as_the_paper_says_or_sets():
    b = _squares_bank()
    q = QuestionContext(4, 0, context=(0,))
    kinds = ["swap_attribute"]
    # The paper's text: k objects of the class with other attributes. Four such squares,
    # so k = 3 gives three distinct objects, whatever their attribute sets.
    objects = FeatureSwapPlanner(b, SHAPE_VECTORS, k=3, seed=0, attribute_swaps="objects")
    swaps = objects.swaps(q, kinds)
    assert len(swaps) == 3 and len({s.donor for s in swaps}) == 3
    assert {s.donor for s in swaps} <= {(1, 0), (1, 1), (1, 2), (1, 3)}
    for s in swaps:
        assert s.after_attributes == b.attributes[b.row(*s.donor)] != ("blue", "large")
    # The earlier rule, a named option: attribute sets first, so only two swaps (red
    # small, green small) however many objects share a set.
    sets = FeatureSwapPlanner(b, SHAPE_VECTORS, k=3, seed=0, attribute_swaps="sets")
    assert sorted(s.after_attributes for s in sets.swaps(q, kinds)) == [
        ("green", "small"),
        ("red", "small"),
    ]
    # Over many questions at k = 1, objects picks the green square about 1 time in 4 (one
    # object of four), sets about 1 in 2 (one set of two).
    greens = {}
    for rule in ("objects", "sets"):
        planner = FeatureSwapPlanner(b, SHAPE_VECTORS, k=1, seed=0, attribute_swaps=rule)
        picks = [planner.swaps(QuestionContext(i, 0, context=(0,)), kinds)[0] for i in range(400)]
        greens[rule] = sum(s.after_attributes == ("green", "small") for s in picks) / 400
    assert 0.19 < greens["objects"] < 0.31 and 0.42 < greens["sets"] < 0.58
    # A named attribute is never swapped in; the first k of a longer run are the run's.
    named = QuestionContext(4, 0, context=(0,), excluded_attributes=frozenset({"green"}))
    assert all(s.donor != (1, 3) for s in objects.swaps(named, kinds))
    for k in (1, 2):
        small = FeatureSwapPlanner(b, SHAPE_VECTORS, k=k, seed=0, attribute_swaps="objects")
        assert [_key(s) for s in small.swaps(q, kinds)] == [_key(s) for s in swaps[:k]]
    with pytest.raises(ValueError, match="attribute_swaps is one of"):
        FeatureSwapPlanner(b, SHAPE_VECTORS, k=1, seed=0, attribute_swaps="uniform")


def test_a_detector_bank_renders_the_scenes_its_folder_lacks(tmp_path):
    """Donors outside the sample (context.donors: split): their crops come from the
    scenes rendered from their graphs, as the scenes adapter serves them."""
    from vqarobust import store
    from vqarobust.features.detector import _object_crops

    def folder(name, ids):
        rows = [
            {
                "image_id": i,
                "bytes": scenes.png(scenes.render(scenes.scene(0, "test", i))),
                "format": "png",
                "width": 128,
                "height": 128,
            }
            for i in ids
        ]
        store.write_image_shards(iter(rows), tmp_path / name)
        return str(tmp_path / name)

    every_rows, every_crops = _object_crops(folder("all", range(6)), 0, "test")
    rows, crops = _object_crops(folder("sample", [1, 3]), 0, "test", rendered=range(6))
    assert rows == every_rows
    np.testing.assert_array_equal(crops, every_crops)
    sample_rows, _ = _object_crops(folder("sample-only", [1, 3]), 0, "test")
    assert {r["image_id"] for r in sample_rows} == {1, 3}
