"""GQA: the adapter, released features matched to scene graphs, the questions' context,
and the context study end to end on a miniature in the official layouts
(tests/gqa_data.py)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from tests.gqa_data import write_miniature
from vqarobust.config import ConfigError, validate_config
from vqarobust.datasets.gqa import N_OFFSET, image_key, image_number, read_gqa


@pytest.fixture(scope="module")
def mini(tmp_path_factory):
    return write_miniature(tmp_path_factory.mktemp("gqa"), images=True)


def test_image_ids_of_both_kinds_become_distinct_numbers():
    assert image_number("2370799") == 2370799 and image_key(2370799) == "2370799"
    assert image_number("n161313") == N_OFFSET + 161313
    assert image_key(N_OFFSET + 161313) == "n161313"
    assert image_number("161313") != image_number("n161313")
    for bad in ("x12", "n", "", str(N_OFFSET)):
        with pytest.raises(ValueError, match="GQA image id"):
            image_number(bad)


def test_the_adapter_reads_the_official_layout(mini, tmp_path):
    table = read_gqa(mini.questions, mini.scene_graphs)
    entries = json.loads(mini.questions.read_text())
    assert table.height == len(entries) == 18
    row = table.filter(table["question_id"] == 20_000_010).row(0, named=True)
    entry = entries["20000010"]
    assert row["image_id"] == N_OFFSET + 1001 and row["question"] == entry["question"]
    assert row["answers"] == [entry["answer"]] * 10  # exact match = VQA accuracy
    assert row["question_type"] == "colorQuery"  # GQA's types.detailed
    # A question lacking its answer, or naming an image without a scene graph: errors
    # that count and name them.
    broken = dict(entries)
    broken["20000000"] = {k: v for k, v in entries["20000000"].items() if k != "answer"}
    (tmp_path / "q.json").write_text(json.dumps(broken))
    with pytest.raises(ValueError, match=r"1 questions lack one of .*'20000000'"):
        read_gqa(tmp_path / "q.json", mini.scene_graphs)
    orphan = {**entries, "20000099": {**entries["20000000"], "imageId": "777"}}
    (tmp_path / "q.json").write_text(json.dumps(orphan))
    with pytest.raises(ValueError, match=r"1 questions \(of 1 images\) .*images \['777'\]"):
        read_gqa(tmp_path / "q.json", mini.scene_graphs)


def test_prepared_with_and_without_images(mini, tmp_path):
    from vqarobust import store
    from vqarobust.datasets import PreparedOutputs, prepare_dataset

    def prepare(name, **source):
        out = tmp_path / name
        counts = prepare_dataset(
            "gqa",
            PreparedOutputs(out / "q.parquet", out / "img", out / "m.txt", out / "d.json"),
            questions=str(mini.questions),
            scene_graphs=str(mini.scene_graphs),
            **source,
        )
        return counts, out

    counts, out = prepare("with", images=str(mini.images))
    assert counts == {"images": 6, "questions": 18, "skipped_images": 0}
    ids = {r["image_id"] for r in store.iter_images(out / "img")}
    assert ids == {image_number(k) for k in json.loads(mini.scene_graphs.read_text())}
    counts, out = prepare("without")
    assert counts["images"] == 6 and counts["questions"] == 18
    assert not list((out / "img").iterdir())  # no shards: nothing reads pixels
    assert json.loads((out / "d.json").read_text())["has_images"] is False


def test_released_features_are_matched_to_the_scene_graphs(mini, tmp_path):
    from vqarobust.features.extract import FeatureInputs, extract_features
    from vqarobust.features.table import FeatureTable, read_info
    from vqarobust.store import write_table

    questions = tmp_path / "q.parquet"
    write_table(read_gqa(mini.questions, mini.scene_graphs).to_arrow(), questions)

    def inputs(released):
        return FeatureInputs(
            questions=str(questions), scene_graphs=str(mini.scene_graphs), released=released
        )

    h5_files = {"info": str(mini.info), "folder": str(mini.h5_folder)}
    extract_features(tmp_path / "h5.parquet", "gqa_h5", inputs(h5_files), adapter="gqa")
    extract_features(
        tmp_path / "tsv.parquet", "obj36", inputs({"path": str(mini.tsv)}), adapter="gqa"
    )
    h5 = FeatureTable.read(tmp_path / "h5.parquet")
    tsv = FeatureTable.read(tmp_path / "tsv.parquet")
    # The same detections in both layouts: the same table, rows in the detector's order
    # (the h5 slot's first objectsNum rows; the noise past them never read).
    np.testing.assert_array_equal(h5.matrix, tsv.matrix)
    assert h5.object_ids == tsv.object_ids and h5.classes == tsv.classes
    graphs = json.loads(mini.scene_graphs.read_text())
    n_objects = sum(len(g["objects"]) for g in graphs.values())
    info = read_info(tmp_path / "h5.parquet")
    assert info == {
        "kind": "gqa_h5",
        "dim": mini.dim,
        "images": 6,
        "question_images": 6,
        "detections": n_objects + 6,
        "matched": n_objects,
        "unmatched": 6,
    }
    for image_id, (start, end) in h5.rows.items():
        objects = graphs[image_key(image_id)]["objects"]
        labels = h5.labels(image_id)
        assert sorted(o for _, _, o in labels if o is not None) == sorted(objects)
        for (cls, attrs, oid), box in zip(labels, h5.boxes[start:end], strict=True):
            if oid is None:  # the corner speck: no labels, never a donor
                assert cls is None and attrs == () and box[2] < 0.01
                continue
            o = objects[oid]
            assert cls == o["name"] and attrs == tuple(o["attributes"])
            assert abs(box[0] - o["x"] / 640) < 5 / 640  # normalized by the image's width
    with pytest.raises(KeyError, match="lack 1 of the 6 images"):
        tsv_lines = mini.tsv.read_text().splitlines(keepends=True)
        (tmp_path / "short.tsv").write_text("".join(tsv_lines[1:]))
        short = inputs({"path": str(tmp_path / "short.tsv")})
        extract_features(tmp_path / "x.parquet", "obj36", short, adapter="gqa")


def test_the_context_is_the_matched_objects_the_reasoning_does_not_select(mini, tmp_path):
    from vqarobust.datasets.gqa import questions_by_number, read_json
    from vqarobust.features.extract import FeatureInputs, extract_features
    from vqarobust.features.table import FeatureTable
    from vqarobust.materialize.feature_context import gqa_contexts
    from vqarobust.store import read_questions, write_table

    path = tmp_path / "q.parquet"
    write_table(read_gqa(mini.questions, mini.scene_graphs).to_arrow(), path)
    extract_features(
        tmp_path / "f.parquet",
        "obj36",
        FeatureInputs(
            questions=str(path),
            scene_graphs=str(mini.scene_graphs),
            released={"path": str(mini.tsv)},
        ),
        adapter="gqa",
    )
    bank = FeatureTable.read(tmp_path / "f.parquet")
    entries = questions_by_number(read_json(mini.questions, "q"))
    graphs = read_json(mini.scene_graphs, "g")
    contexts = gqa_contexts(read_questions(path), entries, graphs, bank)
    assert len(contexts) == 18
    for c in contexts:
        labels = bank.labels(c.image_id)
        relevant = mini.relevant[str(c.question_id)]
        expected = [i for i, (_, _, o) in enumerate(labels) if o is not None and o not in relevant]
        assert list(c.context) == expected
        objects = graphs[image_key(c.image_id)]["objects"]
        assert {objects[o]["name"] for o in relevant} <= c.excluded_classes
    # The existence question selects nothing: every matched object is its context, and the
    # class it asks about is never swapped in (that would change its answer).
    exist = next(c for c in contexts if c.question_id == 20_000_001)
    assert len(exist.context) == len(graphs[image_key(exist.image_id)]["objects"])
    absent = entries[20_000_001]["question"].removeprefix("Is there a ").rstrip("?")
    assert absent in exist.excluded_classes
    colour = next(c for c in contexts if c.question_id == 20_000_000)
    assert entries[20_000_000]["answer"] in colour.excluded_attributes  # its object's colour


def test_the_names_a_question_says():
    from vqarobust.datasets.gqa_graphs import mentioned_names

    names = ["bird", "dining table", "table", "glass", "red", "bus", "s"]
    assert mentioned_names("Are there birds or glasses?", names) == {"bird", "glass"}
    assert mentioned_names("Is the dining table red?", names) == {"dining table", "table", "red"}
    assert mentioned_names("Which is larger, the bus or the tables?", names) == {"bus", "table"}
    assert mentioned_names("What is on it?", names) == set()


def _config(mini, **extra):
    config = {
        "study": "gqa-mini",
        "dataset": {
            "name": "gqa",
            "adapter": "gqa",
            "questions": str(mini.questions),
            "scene_graphs": str(mini.scene_graphs),
        },
        "corruptions": [],
        "controls": [],
        "severities": [1],
        # Without images, the VRE side is the questions': a model reads the clean features.
        "text": {"perturbations": ["keyboard"]},
        "context": {
            "perturbations": ["swap_class", "swap_attribute"],
            "k": 2,
            "reliance_k": [1, 2],
        },
        "features": {
            "h5": {"kind": "gqa_h5", "info": str(mini.info), "folder": str(mini.h5_folder)},
            "tsv": {"kind": "obj36", "path": str(mini.tsv)},
            "sight": {"kind": "perfect_sight"},
        },
        "models": {},
    }
    config.update(extra)
    return config


def test_config_checks_of_gqa(mini):
    lx = {"family": "lxmert", "path_or_id": "x", "features": "h5"}
    ok = validate_config(_config(mini, models={"lx": lx}))
    assert ok["dataset"]["n_images"] is None
    no_vre = _config(mini, models={"lx": lx}, text={"perturbations": []})
    with pytest.raises(ConfigError, match="the VRE suite needs image corruptions or text"):
        validate_config(no_vre)
    with pytest.raises(ConfigError, match="models.vilt: family vqa-classifier reads pixels"):
        validate_config(
            _config(mini, models={"vilt": {"family": "vqa-classifier", "path_or_id": "x"}})
        )
    with pytest.raises(ConfigError, match="at corruptions: image perturbations need dataset.im"):
        validate_config(_config(mini, corruptions=["snow"], models={"lx": lx}))
    with_images = _config(mini, corruptions=["snow"], models={"lx": lx})
    with_images["dataset"]["images"] = str(mini.images)
    with pytest.raises(ConfigError, match="models.lx reads released features, which are of "):
        validate_config(with_images)
    broken = _config(mini, models={"lx": lx})
    del broken["features"]["tsv"]["path"]
    with pytest.raises(ConfigError, match="features.tsv: kind obj36 needs path"):
        validate_config(broken)
    broken = _config(mini, models={"lx": lx})
    broken["features"]["h5"]["path"] = str(mini.tsv)
    with pytest.raises(ConfigError, match="features.h5.path: kind gqa_h5 does not read it"):
        validate_config(broken)
    broken = _config(mini, models={"lx": lx})
    broken["features"]["h5"]["info"] = "nowhere.json"
    with pytest.raises(ConfigError, match="features.h5.info: no file nowhere.json"):
        validate_config(broken)
    scenes = {
        "dataset": {"name": "s", "adapter": "scenes"},
        "corruptions": ["snow"],
        "models": {"lx": {**lx, "train": {"architecture": "lxmert"}}},
        "features": {
            "h5": {"kind": "gqa_h5", "info": str(mini.info), "folder": str(mini.h5_folder)}
        },
    }
    with pytest.raises(ConfigError, match="features.h5.kind: gqa_h5 features need dataset.adap"):
        validate_config(scenes)


@pytest.mark.workflow
@pytest.mark.slow
def test_the_gqa_context_study_runs_end_to_end(mini, tmp_path):
    """Released features in both layouts and perfect sight, a tiny random-init LXMERT on
    each (given as checkpoints: GQA models are not trained here), to DuckDB and the report."""
    import duckdb

    from tests.conftest import run_workflow
    from tests.tiny_checkpoints import tiny_lxmert
    from vqarobust.features.word_vectors import word_vectors

    sight_dim = 2 * len(next(iter(word_vectors(["cat"]).values())))
    models = {}
    # Two answers, ordered so that each untrained model (its seed-0 weights prefer one
    # index) answers "no": the existence questions are then right and context reliance has
    # questions to count.
    runs = (
        ("lx-h5", "h5", mini.dim, ["yes", "no"]),
        ("lx-tsv", "tsv", mini.dim, ["yes", "no"]),
        ("lx-sight", "sight", sight_dim, ["no", "yes"]),
    )
    for name, source, dim, answers in runs:
        path = tiny_lxmert(tmp_path / "checkpoints" / name, dim=dim, answers=answers)
        models[name] = {
            "family": "lxmert",
            "path_or_id": str(path),
            "features": source,
            "device": "cpu",
            "batch_size": 8,
        }
    run_workflow(tmp_path, _config(mini, models=models))
    results = tmp_path / "results" / "gqa"
    with duckdb.connect(str(results / "robustness.duckdb"), read_only=True) as con:
        reliance = con.sql(
            "SELECT model, perturbation FROM context_reliance ORDER BY ALL"
        ).fetchall()
        assert reliance == [
            (m, p) for m in sorted(models) for p in ("all", "swap_attribute", "swap_class")
        ]
        inputs = con.sql("SELECT model, kind FROM model_inputs ORDER BY model").fetchall()
        assert inputs == [("lx-h5", "gqa_h5"), ("lx-sight", "perfect_sight"), ("lx-tsv", "obj36")]
        clean = con.sql(
            "SELECT model, count(*) FROM predictions WHERE modality = 'clean' "
            "GROUP BY model ORDER BY model"
        ).fetchall()
        assert clean == [(m, 18) for m in sorted(models)]
        swaps = con.sql("SELECT * FROM feature_swaps").pl()
    # Only context objects were swapped: never an object the question's reasoning selects,
    # never an unmatched detection; the two released layouts make the same swaps.
    h5 = pq.read_table(tmp_path / "resources" / "features" / "gqa" / "h5" / "eval.parquet")
    object_of = {(r["image_id"], r["object_index"]): r["object_id"] for r in h5.to_pylist()}
    released = swaps.filter(swaps["source"] == "h5")
    assert released.height > 0
    for r in released.iter_rows(named=True):
        oid = object_of[(r["source_image_id"], r["object_index"])]
        assert oid is not None and oid not in mini.relevant[str(r["question_id"])]
    cols = ["question_id", "perturbation", "severity", "object_index", "after"]
    tsv = swaps.filter(swaps["source"] == "tsv").select(cols).sort(cols)
    assert released.select(cols).sort(cols).equals(tsv)
    assert swaps.filter(swaps["source"] == "sight").height > 0
    log = (tmp_path / "logs" / "gqa" / "extract_features" / "h5" / "eval.log").read_text()
    assert "6 matched to a scene-graph object" not in log and "6 unmatched (left alone)" in log
    report = (results / "report" / "index.html").read_text()
    assert "lx-sight" in report and "Table 1" in report
    from vqarobust.summary import NO_IMAGE_SIDE, summarize, to_markdown

    assert NO_IMAGE_SIDE in report
    summary = to_markdown(summarize(results / "robustness.duckdb"), "summary")
    assert NO_IMAGE_SIDE in summary and "mean corrupted accuracy" not in summary
    assert "| lx-tsv | obj36 | checkpoint |" in summary  # Table 2 with what each model reads
    # Weights replaced in place (same path) rerun that model's inference, nothing else.
    from tests.plans import FROM_PREDICTIONS, analyses, plan

    assert plan(tmp_path) == {}
    tiny_lxmert(tmp_path / "checkpoints" / "lx-h5", dim=mini.dim, answers=["yes", "no"], seed=1)
    jobs = plan(tmp_path)
    assert jobs == {
        "run_model": 1,
        **analyses(*FROM_PREDICTIONS, "context_at_k"),
        "load_duckdb": 1,
        "render_report": 1,
        "all": 1,
    }


def test_the_shipped_gqa_config_plans_the_papers_run(mini, tmp_path, monkeypatch):
    """config/gqa.yaml as shipped, on the miniature's files under the names it expects:
    its DAG (a dry run) prepares the split without images, makes one feature table per
    released source, swaps features once per source and runs each model on clean, the
    three text perturbations and the two swap kinds."""
    import re
    import shutil

    from tests.conftest import REPO
    from tests.study_run import run_study

    data = tmp_path / "data" / "gqa"
    (data / "objects").mkdir(parents=True)
    shutil.copy(mini.questions, data / "val_balanced_questions.json")
    shutil.copy(mini.scene_graphs, data / "val_sceneGraphs.json")
    shutil.copy(mini.tsv, data / "vg_gqa_obj36.tsv")
    shutil.copy(mini.info, data / "objects" / "gqa_objects_info.json")
    for h5 in mini.h5_folder.glob("*.h5"):
        shutil.copy(h5, data / "objects" / h5.name)
    (data / "trainval_label2ans.json").write_text(json.dumps(mini.answers))
    # The paper's GloVe is the study's setting: without its file the run stops at start.
    shipped = yaml.safe_load((REPO / "config" / "gqa.yaml").read_text())
    assert shipped["context"]["word_vectors"] == "data/glove.6B.300d.txt"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match="context.word_vectors: no file data/glove.6B.300d.txt"):
        validate_config(shipped)
    graphs = json.loads(mini.scene_graphs.read_text())
    names = {
        n
        for g in graphs.values()
        for o in g["objects"].values()
        for n in (o["name"], *o.get("attributes", []))
    }
    words = sorted({w for n in names for w in n.split()})
    rng = np.random.default_rng(0)
    (tmp_path / "data" / "glove.6B.300d.txt").write_text(
        "".join(f"{w} {' '.join(f'{v:.4f}' for v in rng.normal(size=300))}\n" for w in words)
    )
    out = run_study(REPO / "config" / "gqa.yaml", tmp_path, {}, "-n", "--quiet", "rules")
    counts = {k: int(v) for k, v in re.findall(r"^(\w+)\s+(\d+)$", out, flags=re.M)}
    assert {
        k: counts.get(k, 0)
        for k in (
            "prepare_dataset",
            "extract_features",
            "swap_features",
            "corrupt_images",
            "swap_context",
            "run_model",
        )
    } == {
        "prepare_dataset": 1,
        "extract_features": 2,
        "swap_features": 2,
        "corrupt_images": 0,
        "swap_context": 0,
        "run_model": 2,
    }


def test_the_donor_bank_is_every_scene_graph_of_the_split(mini, tmp_path):
    """context.donors: split (the paper's "another object in the dataset"): donors and
    candidate classes come from every scene graph of the split, not only from the images
    the sampled questions ask about; sample is the earlier rule."""
    import polars as pl

    from vqarobust.context.feature_swaps import FeatureSwap, apply_swap
    from vqarobust.datasets.gqa import questions_by_number, read_json
    from vqarobust.features.extract import FeatureInputs, extract_features
    from vqarobust.features.table import FeatureTable, read_info
    from vqarobust.materialize.feature_context import (
        FeatureSwapSettings,
        gqa_contexts,
        plan_feature_swaps,
    )
    from vqarobust.store import read_questions, write_table

    graphs = read_json(mini.scene_graphs, "g")
    entries = questions_by_number(read_json(mini.questions, "q"))
    sampled = image_number(next(iter(graphs)))  # the questions of one image only
    names = {key: {o["name"] for o in g["objects"].values()} for key, g in graphs.items()}
    outside = set().union(*names.values()) - names[image_key(sampled)]
    assert outside  # classes whose every object is outside the sample
    table = read_gqa(mini.questions, mini.scene_graphs).filter(pl.col("image_id") == sampled)
    questions = tmp_path / "q.parquet"
    write_table(table.to_arrow(), questions)

    def plan(kind, donors, tsv=None):
        out = tmp_path / f"{kind}-{donors}.parquet"
        inputs = FeatureInputs(
            questions=str(questions),
            scene_graphs=str(mini.scene_graphs),
            released={"path": str(tsv)} if tsv else None,
        )
        extract_features(out, kind, inputs, adapter="gqa", donors=donors)
        bank = FeatureTable.read(out)
        contexts = gqa_contexts(read_questions(questions), entries, graphs, bank)
        mode = "labels" if kind == "perfect_sight" else "donor"
        settings = FeatureSwapSettings(mode, k=10, adapter="gqa")
        rows = plan_feature_swaps(contexts, bank, ["swap_class", "swap_attribute"], settings)
        return bank, rows, read_info(out), contexts

    for kind, tsv in (("obj36", mini.tsv), ("perfect_sight", None)):
        bank, rows, info, contexts = plan(kind, "split", tsv=tsv)
        assert set(bank.rows) == {image_number(k) for k in graphs}
        assert info["question_images"] == 1
        # Every class only outside the sample that has an object a question allows (its
        # class and attributes not named by the question) is swapped in.
        labels = list(zip(bank.classes, bank.attributes, strict=True))
        allowed = {
            c
            for q in contexts
            for c in outside - q.excluded_classes
            if any(o == c and not set(a) & q.excluded_attributes for o, a in labels)
        }
        swapped_in = {r["after_class"] for r in rows if r["perturbation"] == "swap_class"}
        assert allowed and allowed == outside & swapped_in
        for r in rows:
            if r["perturbation"] == "swap_class" and r["after_class"] in outside:
                if kind == "obj36":  # the donor's row, from an image no question asks about
                    assert r["donor_image_id"] != sampled
                    donor = bank.row(r["donor_image_id"], r["donor_object_index"])
                    assert bank.classes[donor] == r["after_class"]
                    swap = FeatureSwap(
                        "swap_class",
                        r["rank"],
                        r["object_index"],
                        r["after_class"],
                        tuple(r["after_attributes"]),
                        (r["donor_image_id"], r["donor_object_index"]),
                    )
                    features = apply_swap(bank, sampled, swap).features
                    np.testing.assert_array_equal(features[r["object_index"]], bank.matrix[donor])
                else:  # perfect sight: the labels of a real object of that class
                    assert (r["after_class"], tuple(r["after_attributes"])) in labels
        bank, rows, _, _ = plan(kind, "sample", tsv=tsv)
        assert set(bank.rows) == {sampled}
        assert not outside & {r["after_class"] for r in rows}
    # Released features of donor images the file lacks are counted, not silently dropped;
    # a question's image the file lacks still stops the job.
    lines = mini.tsv.read_text().splitlines(keepends=True)
    other = next(k for k in graphs if image_number(k) != sampled)
    short = tmp_path / "short.tsv"
    short.write_text("".join(line for line in lines if not line.startswith(f"{other}\t")))
    bank, _, info, _ = plan("obj36", "split", tsv=short)
    assert info["donor_images"] == len(graphs) - 2
    assert info["donor_images_without_features"] == 1
    assert image_number(other) not in bank
    no_sample = tmp_path / "no-sample.tsv"
    kept = [line for line in lines if not line.startswith(f"{image_key(sampled)}\t")]
    no_sample.write_text("".join(kept))
    with pytest.raises(KeyError, match="lack 1 of the 1 images the questions ask about"):
        plan("obj36", "split", tsv=no_sample)
