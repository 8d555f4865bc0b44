import logging

import polars as pl
import pytest

from tests.counting_models import Counting, count_image_encodes
from vqarobust import store
from vqarobust.inference import Subset, run_inference
from vqarobust.materialize.images import corrupt_subset
from vqarobust.models import ModelRef
from vqarobust.models.base import VQAModel


def test_one_job_answers_every_subset(checkpoints, easy_vqa_eval, tmp_path):
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow1", "snow", 1)
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow2", "snow", 2)
    out = tmp_path / "pred.parquet"
    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"]), "batch_size": 8}
    subsets = [
        Subset("snow", 1, str(tmp_path / "snow1")),
        Subset("snow", 2, str(tmp_path / "snow2")),
    ]
    n = run_inference(ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, out, device="cpu")
    df = pl.read_parquet(out)
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    assert n == df.height == 2 * n_q
    assert df.columns == store.PREDICTION_SCHEMA.names
    assert df.group_by("severity").len().sort("severity")["len"].to_list() == [n_q, n_q]
    assert set(df["model"]) == {"cnn"} and set(df["perturbation"]) == {"snow"}
    assert df["answer"].null_count() == 0


def test_missing_images_fail_without_output(checkpoints, easy_vqa_eval, tmp_path):
    rows = list(store.iter_images(easy_vqa_eval["images"]))[:-1]
    store.write_image_shards(rows, tmp_path / "partial")
    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])}
    out = tmp_path / "pred.parquet"
    subsets = [Subset("clean", 0, str(tmp_path / "partial"))]
    with pytest.raises(ValueError, match="images asked about are missing"):
        run_inference(ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, out, device="cpu")
    assert not out.exists()


def test_a_restarted_job_resumes_from_finished_chunks(easy_vqa_eval, tmp_path):
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "s1", "snow", 1)
    subsets = [
        Subset("clean", 0, str(easy_vqa_eval["images"])),
        Subset("snow", 1, str(tmp_path / "s1")),
    ]
    out = tmp_path / "pred.parquet"
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    spec = {"family": "test"}

    first = Counting(fail_after=5)  # 4-question batches, 8-question chunks: dies in chunk 3
    with pytest.raises(RuntimeError, match="killed"):
        run_inference(
            ModelRef("m", spec, loader=lambda *a, **k: first),
            easy_vqa_eval["questions"],
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    assert not out.exists()
    done = sorted(p.name[-15:] for p in (tmp_path / "pred.parquet.chunks").glob("*.parquet"))
    assert done == ["0000000.parquet", "0000008.parquet"]  # the first two chunks of clean

    second = Counting()
    n = run_inference(
        ModelRef("m", spec, loader=lambda *a, **k: second),
        easy_vqa_eval["questions"],
        subsets,
        out,
        "cpu",
        chunk_size=8,
    )
    assert n == 2 * n_q
    assert second.answered == 2 * n_q - 16  # the two finished chunks are not recomputed
    df = pl.read_parquet(out)
    assert df.height == 2 * n_q and df["question_id"].n_unique() == n_q
    # The chunks stay, for a rerun with other subsets: the output's rows, once.
    kept = pl.concat(
        [pl.read_parquet(f) for f in (tmp_path / "pred.parquet.chunks").glob("*.parquet")]
    )
    assert kept.sort(["severity", "question_id"]).equals(df.sort(["severity", "question_id"]))


def test_partial_results_of_other_inputs_are_discarded(easy_vqa_eval, tmp_path):
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out = tmp_path / "pred.parquet"
    first = Counting(fail_after=2)
    with pytest.raises(RuntimeError):
        run_inference(
            ModelRef("m", {"family": "a"}, loader=lambda *a, **k: first),
            easy_vqa_eval["questions"],
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    second = Counting()
    run_inference(
        ModelRef("m", {"family": "b"}, loader=lambda *a, **k: second),
        easy_vqa_eval["questions"],
        subsets,
        out,
        "cpu",
        chunk_size=8,
    )
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    assert second.answered == n_q  # a changed spec recomputes everything


def test_a_sigkilled_job_resumes(easy_vqa_eval, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out = tmp_path / "pred.parquet"
    code = (
        "from tests.counting_models import Slow\n"
        "from vqarobust.inference import Subset, run_inference\n"
        "from vqarobust.models import ModelRef\n"
        "run_inference(ModelRef('m', {'family': 't'}, loader=lambda *a, **k: Slow()), "
        f"{str(easy_vqa_eval['questions'])!r}, "
        f"[Subset('clean', 0, {str(easy_vqa_eval['images'])!r})], {str(out)!r}, 'cpu', "
        "chunk_size=8)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=REPO)
    partial = tmp_path / "pred.parquet.chunks"
    deadline = time.monotonic() + 60
    while len(list(partial.glob("*.parquet"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = list(partial.glob("*.parquet"))
    assert len(finished) >= 2 and not out.exists()
    kept = sum(pl.read_parquet(f).height for f in finished)

    model = Counting()
    n = run_inference(
        ModelRef("m", {"family": "t"}, loader=lambda *a, **k: model),
        easy_vqa_eval["questions"],
        subsets,
        out,
        "cpu",
        chunk_size=8,
    )
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    assert n == n_q and model.answered == n_q - kept  # finished chunks are not recomputed
    assert pl.read_parquet(out)["question_id"].n_unique() == n_q


def test_an_undecodable_image_is_named(easy_vqa_eval, tmp_path):
    rows = list(store.iter_images(easy_vqa_eval["images"]))
    rows[2] = {**rows[2], "bytes": b"not an image"}
    store.write_image_shards(rows, tmp_path / "broken")
    subsets = [Subset("clean", 0, str(tmp_path / "broken"))]
    bad_id = rows[2]["image_id"]
    with pytest.raises(ValueError, match=f"image {bad_id} does not decode"):
        run_inference(
            ModelRef("m", {"family": "t"}, loader=lambda *a, **k: Counting()),
            easy_vqa_eval["questions"],
            subsets,
            tmp_path / "p.parquet",
            "cpu",
        )


class ImagesSeen(VQAModel):
    """Records how many distinct images each respond call received."""

    def __init__(self):
        super().__init__(batch_size=4)
        self.distinct_per_call: list[int] = []

    def respond(self, images, questions, progress=None):
        self.distinct_per_call.append(len({id(im) for im in images}))
        return super().respond(images, questions, progress)

    def answer(self, images, questions):
        return [f"{im.size[0]}" for im in images]


def test_a_chunk_decodes_only_its_own_images(easy_vqa_eval, tmp_path, monkeypatch):
    import vqarobust.inference as inference

    decoded: list[int] = []
    original = inference.decode_images

    def spy(shards, ids):
        decoded.append(len(ids))
        return original(shards, ids)

    monkeypatch.setattr(inference, "decode_images", spy)
    model = ImagesSeen()
    questions = store.read_questions(easy_vqa_eval["questions"])
    out = tmp_path / "pred.parquet"
    n = run_inference(
        ModelRef("m", {"family": "x"}, loader=lambda *a, **k: model),
        easy_vqa_eval["questions"],
        [Subset("clean", 0, str(easy_vqa_eval["images"]))],
        out,
        "cpu",
        chunk_size=8,
    )
    assert n == questions.num_rows
    # Questions go in image order, so 8 questions span at most 2-3 of the 6 images
    # (about 9 questions each); never the whole subset at once.
    assert len(decoded) == -(-questions.num_rows // 8)
    assert max(decoded) <= 3 and sum(decoded) < 2 * 6 + len(decoded)
    assert model.distinct_per_call == decoded
    answers = pl.read_parquet(out)
    assert answers["question_id"].sort().to_list() == sorted(questions["question_id"].to_pylist())


def test_image_shards_read_only_what_is_asked(easy_vqa_eval, tmp_path):
    rows = list(store.iter_images(easy_vqa_eval["images"]))
    store.write_image_shards(rows, tmp_path / "imgs", shard_bytes=1)  # one image per shard
    shards = store.ImageShards(tmp_path / "imgs")
    ids = [r["image_id"] for r in rows]
    assert len(shards) == 6 and ids[2] in shards and -1 not in shards
    got = shards.read([ids[4], ids[1]])
    assert got == {ids[4]: rows[4]["bytes"], ids[1]: rows[1]["bytes"]}
    with pytest.raises(KeyError, match=r"no images with ids \[-1\]"):
        shards.read([ids[0], -1])


class Echo(VQAModel):
    """Answers with the question it was asked; questions over 30 characters are cut."""

    def __init__(self):
        super().__init__(batch_size=4)

    def truncated(self, questions):
        return [len(q) > 30 for q in questions]

    def answer(self, images, questions):
        return [q[:30] for q in questions]


def test_question_sets_are_asked_about_the_clean_images(easy_vqa_eval, tmp_path):
    from vqarobust.materialize.questions import perturb_question_set

    sets = {s: tmp_path / f"typo{s}.parquet" for s in (1, 2)}
    perturb_question_set(easy_vqa_eval["questions"], sets, "char_insert", global_seed=0)
    subsets = [
        Subset("char_insert", s, str(easy_vqa_eval["images"]), "text", str(path))
        for s, path in sets.items()
    ]
    out = tmp_path / "pred.parquet"
    run_inference(
        ModelRef("echo", {"device": "cpu"}, loader=lambda *a, **k: Echo()),
        easy_vqa_eval["questions"],
        subsets,
        out,
        device="cpu",
    )
    df = pl.read_parquet(out)
    assert set(df["modality"]) == {"text"} and set(df["perturbation"]) == {"char_insert"}
    for s, path in sets.items():
        asked = pl.read_parquet(path).select("question_id", "perturbed")
        got = df.filter(severity=s).join(asked, on="question_id")
        assert got.height == asked.height
        assert got["answer"].to_list() == [q[:30] for q in got["perturbed"]]
        assert got["truncated"].to_list() == [len(q) > 30 for q in got["perturbed"]]
    assert df["truncated"].sum() > 0


def test_swap_indices_past_int8_and_chunks_kept_from_int8(easy_vqa_eval, tmp_path):
    """A context set's severities are its swap indices, past 127 when every object of a
    GQA image is swapped: the job asks each, stores them as int16, and merges a finished
    chunk written while severities were int8."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from vqarobust.inference import context_severities

    qs = store.read_questions(easy_vqa_eval["questions"]).slice(0, 6)
    n = qs.num_rows
    severities = [1, 2, 300] * 2
    path = tmp_path / "swap_class.parquet"
    store.write_table(
        pa.table(
            {
                "question_id": qs.column("question_id"),
                "image_id": qs.column("image_id"),
                "original": qs.column("question"),
                "perturbed": qs.column("question"),
                "perturbation": ["swap_class"] * n,
                "severity": severities,
                "changed": [True] * n,
                "similarity": [1.0] * n,
                "tries": [1] * n,
            },
            schema=store.QUESTION_SET_SCHEMA,
        ),
        path,
    )
    assert context_severities(path) == [1, 2, 300]
    subsets = [
        Subset("swap_class", s, str(easy_vqa_eval["images"]), "context", str(path))
        for s in context_severities(path)
    ]
    out = tmp_path / "pred.parquet"

    def run():
        run_inference(
            ModelRef("echo", {"device": "cpu"}, loader=lambda *a, **k: Echo()),
            easy_vqa_eval["questions"],
            subsets,
            out,
            device="cpu",
        )
        return pl.read_parquet(out)

    df = run()
    assert df.schema["severity"] == pl.Int16
    assert df.group_by("severity").len().sort("severity").rows() == [(1, 2), (2, 2), (300, 2)]
    # A chunk kept from before the widening: int8 on disk, merged all the same.
    chunks = sorted((tmp_path / "pred.parquet.chunks").glob("*.parquet"))
    small = [c for c in chunks if pq.read_table(c).column("severity")[0].as_py() == 1]
    old = pq.read_table(small[0])
    pq.write_table(
        old.cast(
            old.schema.set(old.schema.get_field_index("severity"), pa.field("severity", pa.int8()))
        ),
        small[0],
    )
    assert pq.read_table(small[0]).schema.field("severity").type == pa.int8()
    out.unlink()
    assert run().sort("severity", "question_id").equals(df.sort("severity", "question_id"))
    assert pq.read_table(small[0]).schema.field("severity").type == pa.int8()  # reused


def test_a_question_set_of_other_questions_is_refused(easy_vqa_eval, tmp_path):
    from vqarobust.materialize.questions import perturb_question_set

    table = store.read_questions(easy_vqa_eval["questions"])
    store.write_table(table.slice(1), tmp_path / "fewer.parquet")
    perturb_question_set(tmp_path / "fewer.parquet", {1: tmp_path / "s.parquet"}, "ocr")
    subsets = [Subset("ocr", 1, str(easy_vqa_eval["images"]), "text", str(tmp_path / "s.parquet"))]
    with pytest.raises(ValueError, match="question ids differ"):
        run_inference(
            ModelRef("echo", {}, loader=lambda *a, **k: Echo()),
            easy_vqa_eval["questions"],
            subsets,
            tmp_path / "p.parquet",
            device="cpu",
        )
    assert not (tmp_path / "p.parquet").exists()


def test_the_vilt_classifier_counts_questions_over_its_text_limit(checkpoints):
    from vqarobust.models import load_model

    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints["vilt"])},
        name="vilt",
        device="cpu",
    )
    short = "what color is the shape?"
    long = " ".join([short] * 8)
    assert model.truncated([short, long]) == [False, True]


def test_the_bag_of_words_model_cuts_nothing_and_warns_of_nothing(
    checkpoints, easy_vqa_eval, caplog
):
    """cnn-bow has no text positions: a question longer than its tokenizer's nominal 40
    tokens is read whole (its answer depends on the words past 40) and is not counted."""
    import logging

    from PIL import Image

    from vqarobust.models import load_model

    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])},
        name="cnn",
        device="cpu",
    )
    long = " ".join(["what color is the shape?"] * 12)
    assert len(model.processor.tokenizer(long, verbose=False)["input_ids"]) > 40
    assert model.truncated([long]) == [False]
    image = Image.new("RGB", (64, 64), "red")
    with caplog.at_level(logging.WARNING):
        model.answer([image], [long])
    assert "longer than the specified maximum" not in caplog.text


class Killed(VQAModel):
    """A real model that dies after ``fail_after`` batches, like a job killed mid-way."""

    def __init__(self, inner: VQAModel, fail_after: int) -> None:
        super().__init__(batch_size=inner.batch_size)
        self.inner, self.fail_after, self.batches = inner, fail_after, 0

    def answer(self, images, questions):
        if self.batches >= self.fail_after:
            raise RuntimeError("killed")
        self.batches += 1
        return self.inner.answer(images, questions)

    def truncated(self, questions):
        return self.inner.truncated(questions)


def _train(data, out, epochs):
    from vqarobust.models.recipe import Recipe
    from vqarobust.models.training import train_reference_model

    recipe = Recipe.of("cnn-bow", epochs=epochs, batch_size=32, channels=[4, 8], hidden_dim=16)
    train_reference_model(str(data["questions"]), str(data["images"]), out, recipe)


def test_a_resumed_job_with_retrained_weights_equals_a_fresh_run(
    easy_vqa_train, easy_vqa_eval, tmp_path, caplog
):
    """Kill mid-inference, change the reference model's epochs (retrained at the same
    path), rerun: the old chunks are discarded, the log says the weights changed, and the
    predictions are a fresh run's."""
    from vqarobust.models import load_model

    weights = tmp_path / "cnn-bow"
    _train(easy_vqa_train, weights, epochs=0.25)
    spec = {"family": "vqa-classifier", "path_or_id": str(weights), "batch_size": 4}
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out = tmp_path / "pred.parquet"
    with pytest.raises(RuntimeError, match="killed"):
        run_inference(
            ModelRef("cnn", spec, loader=lambda *a, **k: Killed(load_model(*a, **k), 3)),
            easy_vqa_eval["questions"],
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    assert len(list((tmp_path / "pred.parquet.chunks").glob("*.parquet"))) == 1

    _train(easy_vqa_train, weights, epochs=1.0)  # the config's epochs changed
    with caplog.at_level("WARNING"):
        run_inference(
            ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, out, "cpu", chunk_size=8
        )
    assert "changed since they were computed: the weights (path_or_id)" in caplog.text
    fresh = tmp_path / "fresh.parquet"
    run_inference(
        ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, fresh, "cpu", chunk_size=8
    )
    assert pl.read_parquet(out).equals(pl.read_parquet(fresh))


def test_a_regenerated_subset_at_the_same_path_is_recomputed(easy_vqa_eval, tmp_path, caplog):
    """The images of a subset are compared by content, not by path."""
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow", "snow", 1)
    subsets = [Subset("snow", 1, str(tmp_path / "snow"))]
    out = tmp_path / "pred.parquet"
    first = Counting(fail_after=2)
    with pytest.raises(RuntimeError):
        run_inference(
            ModelRef("m", {"family": "t"}, loader=lambda *a, **k: first),
            easy_vqa_eval["questions"],
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    corrupt_subset(easy_vqa_eval["images"], tmp_path / "snow", "snow", 4)  # same path
    second = Counting()
    with caplog.at_level("WARNING"):
        run_inference(
            ModelRef("m", {"family": "t"}, loader=lambda *a, **k: second),
            easy_vqa_eval["questions"],
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    assert second.answered == n_q  # nothing of the old images' chunks reused
    assert "the images of image/snow/1" in caplog.text


def test_unchanged_content_at_a_new_mtime_resumes(easy_vqa_eval, tmp_path):
    """Touching (or copying) an input without changing its bytes keeps the finished chunks."""
    import os
    import shutil

    questions = tmp_path / "q.parquet"
    shutil.copy(easy_vqa_eval["questions"], questions)
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    out = tmp_path / "pred.parquet"
    with pytest.raises(RuntimeError):
        run_inference(
            ModelRef("m", {"family": "t"}, loader=lambda *a, **k: Counting(fail_after=2)),
            questions,
            subsets,
            out,
            "cpu",
            chunk_size=8,
        )
    os.utime(questions, (1, 1))
    second = Counting()
    run_inference(
        ModelRef("m", {"family": "t"}, loader=lambda *a, **k: second),
        questions,
        subsets,
        out,
        "cpu",
        chunk_size=8,
    )
    n_q = store.read_questions(questions).num_rows
    assert second.answered == n_q - 8


def test_predictions_carry_their_input_fingerprint(checkpoints, easy_vqa_eval, tmp_path):
    import json

    import pyarrow.parquet as pq

    from vqarobust.digests import file_sha256, tree_sha256

    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["cnn-bow"])}
    out = tmp_path / "pred.parquet"
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    run_inference(ModelRef("cnn", spec), easy_vqa_eval["questions"], subsets, out, "cpu")
    record = json.loads(pq.read_schema(out).metadata[b"vqarobust.inputs"])
    inputs = record["inputs"]
    assert inputs["questions"] == file_sha256(easy_vqa_eval["questions"])
    assert inputs["checkpoint"]["path_or_id"]["sha256"] == tree_sha256(checkpoints["cnn-bow"])
    assert inputs["subsets"][0]["images"] == tree_sha256(easy_vqa_eval["images"])
    assert record["started"] <= record["finished"]


def test_a_job_logs_its_progress_per_subset(easy_vqa_eval, tmp_path, caplog):
    subsets = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    n_q = store.read_questions(easy_vqa_eval["questions"]).num_rows
    with caplog.at_level("INFO", "vqarobust"):
        run_inference(
            ModelRef("m", {"family": "test"}, loader=lambda *a, **k: Counting()),
            easy_vqa_eval["questions"],
            subsets,
            tmp_path / "p.parquet",
            "cpu",
            chunk_size=8,
        )
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("m clean/0: ")]
    assert 1 <= len(lines) <= 10
    assert lines[-1].startswith(f"m clean/0: 100% ({n_q:,}/{n_q:,} questions), ")
    assert all("questions/s" in line for line in lines)
    assert all("ETA" in line for line in lines[:-1])


def test_classifier_answers_do_not_depend_on_batch_or_threads(
    checkpoints, easy_vqa_eval, tmp_path, caplog
):
    """Batch size and CPU threads travel in the runtime channel (they rerun nothing,
    docs/workflow.md): the answers, and so their scores, are the same for any of them,
    whether the threads are torch's or chunks answered at once on threads of the job."""
    import torch

    clean = [Subset("clean", 0, str(easy_vqa_eval["images"]))]
    threads = torch.get_num_threads()
    for key in ("vilt", "cnn-bow"):
        spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints[key])}
        runs = []
        # (batch size, torch threads, the job's threads): the last answers two chunks at
        # once, one torch thread each.
        for batch, n_threads, job_threads in ((1, 1, 1), (16, 2, 1), (4, 1, 2)):
            out = tmp_path / f"{key}-{batch}.parquet"
            torch.set_num_threads(n_threads)
            caplog.clear()
            try:
                with caplog.at_level(logging.INFO, logger="vqarobust.inference"):
                    run_inference(
                        ModelRef(key, spec, options={"batch_size": batch}),
                        easy_vqa_eval["questions"],
                        clean,
                        out,
                        device="cpu",
                        chunk_size=8,
                        threads=job_threads,
                    )
            finally:
                torch.set_num_threads(threads)
            if job_threads == 2:
                assert "2 chunk(s) at once on 1 torch thread(s) each" in caplog.text
            runs.append(pl.read_parquet(out).sort("question_id"))
        assert runs[0]["answer"].to_list() == runs[1]["answer"].to_list()
        assert runs[0]["answer"].to_list() == runs[2]["answer"].to_list()


@pytest.mark.parametrize("key", ["vilt", "cnn-bow", "cnn-film"])
def test_a_classifiers_answer_does_not_depend_on_the_other_images_of_its_batch(checkpoints, key):
    """Each image is preprocessed on its own: batched beside a larger image (which a
    batch-wide processor call would pad it to), a request's logits are those it gets
    alone."""
    import numpy as np
    import torch
    from PIL import Image

    from vqarobust.models import load_model

    rng = np.random.default_rng(0)
    small = Image.fromarray(rng.integers(0, 256, (64, 64, 3), dtype=np.uint8))
    large = Image.fromarray(rng.integers(0, 256, (96, 128, 3), dtype=np.uint8))
    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints[key]), "batch_size": 2}
    )
    question = "what color is the shape?"
    alone = model.logits([small], [question])[0]
    batched = model.logits([small, large], [question, question])[0]
    torch.testing.assert_close(batched, alone, rtol=0, atol=1e-5)


@pytest.mark.parametrize("key", ["vilt", "cnn-bow"])
def test_a_classifier_encodes_each_image_once_per_chunk(checkpoints, key):
    """The image side (ViLT's patch embedding, the late-fusion CNN's features) is computed
    once per image for all its questions, across batches, and gives the answers a
    one-request-at-a-time run gives."""
    from tests.tiny_checkpoints import random_images
    from tests.usual_loops import one_at_a_time
    from vqarobust.models import load_model

    images = random_images(2, size=(64, 64))
    questions = ["what color is the shape?", "is there a circle?", "what shape is it?"]
    requests = [(images[i % 2], questions[i % 3]) for i in range(6)]
    model = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints[key]), "batch_size": 2}
    )
    encoded = []
    count_image_encodes(model, encoded)
    answers = model.answer_all([im for im, _ in requests], [q for _, q in requests])
    assert sum(encoded) == 2
    one_by_one = load_model(
        {"family": "vqa-classifier", "path_or_id": str(checkpoints[key]), "batch_size": 1}
    )
    assert answers == [one_by_one.answer([im], [q])[0] for im, q in requests]
    # ... and the answers of transformers' own one-request-at-a-time loop.
    usual = one_at_a_time("vqa-classifier", str(checkpoints[key]), *zip(*requests, strict=True))
    assert answers == usual
