"""A job of several CPU threads answers that many chunks at once, each on its own thread
(vqarobust.inference.job_workers): what runs at once, what each chunk counts, what a
failing chunk leaves, and what the adapters guard."""

from __future__ import annotations

import threading

import polars as pl
import pyarrow.parquet as pq
import pytest

from tests.counting_models import Counting
from vqarobust import store
from vqarobust.inference import Subset, job_workers, run_inference
from vqarobust.metering import chunk_cost
from vqarobust.models import ModelRef
from vqarobust.models.base import SharesImageFeatures


class ThreadSafe(Counting):
    """Counting, its counts taken under a lock (its chunks run on two threads)."""

    thread_safe = True

    def __init__(self, fail_after: int | None = None) -> None:
        super().__init__(fail_after)
        self.lock = threading.Lock()

    def answer(self, images, questions):
        with self.lock:
            return super().answer(images, questions)


class Meeting(ThreadSafe):
    """The first two chunks wait for each other: answered one after the other, the
    first would wait in vain (the barrier breaks, failing the job)."""

    def __init__(self) -> None:
        super().__init__()
        self.barrier = threading.Barrier(2, timeout=20)
        self.threads: set[str] = set()
        self.calls = 0

    def respond(self, images, questions, progress=None):
        with self.lock:
            self.threads.add(threading.current_thread().name)
            self.calls += 1
            meet = self.calls <= 2
        if meet:
            self.barrier.wait()
        return super().respond(images, questions, progress)


def _run_on_two_threads(model, data, out) -> int:
    """The clean subset in chunks of 8 by a job of two threads; the predictions' count."""
    subsets = [Subset("clean", 0, str(data["images"]))]
    ref = ModelRef("m", {"family": "t"}, loader=lambda *a, **k: model)
    return run_inference(ref, data["questions"], subsets, out, "cpu", chunk_size=8, threads=2)


def test_job_workers_take_the_threads_only_for_a_thread_safe_adapter_on_the_cpu():
    """(chunks at once, torch threads each), worked out by hand."""
    safe, other = ThreadSafe(), Counting()
    assert job_workers(safe, "cpu", 2) == (2, 1)
    assert job_workers(safe, "cpu", 4) == (4, 1)
    assert job_workers(safe, "cpu", 1) == (1, 1)
    assert job_workers(safe, "cuda:0", 2) == (1, 2)  # a GPU runs one chunk at a time
    assert job_workers(other, "cpu", 2) == (1, 2)  # torch's own threads instead


def test_two_chunks_run_at_once_on_threads_and_each_counts_its_own_cost(easy_vqa_eval, tmp_path):
    model = Meeting()
    out = tmp_path / "pred.parquet"
    n = _run_on_two_threads(model, easy_vqa_eval, out)
    questions = store.read_questions(easy_vqa_eval["questions"])
    assert n == questions.num_rows == model.answered
    assert len({t for t in model.threads if t.startswith("chunks")}) == 2
    table = pl.read_parquet(out)
    assert sorted(table["question_id"].to_list()) == sorted(
        questions.column("question_id").to_pylist()
    )
    assert set(table["answer"].to_list()) == {"x"}
    chunks = sorted((tmp_path / "pred.parquet.chunks").glob("*.parquet"))
    assert len(chunks) == -(-questions.num_rows // 8)
    costs = [chunk_cost(path) for path in chunks]
    assert sum(c["questions"] for c in costs) == questions.num_rows
    assert all(c["cpu_s"] >= 0 and c["wall_s"] > 0 for c in costs)


def test_a_failing_chunk_on_a_thread_fails_the_job_and_a_rerun_resumes(easy_vqa_eval, tmp_path):
    """The error reaches the caller, no output is written, the chunks finished before
    it are kept, and the rerun answers only the rest."""
    out = tmp_path / "pred.parquet"
    first = ThreadSafe(fail_after=6)
    with pytest.raises(RuntimeError, match="killed"):
        _run_on_two_threads(first, easy_vqa_eval, out)
    assert not out.exists()
    kept = list((tmp_path / "pred.parquet.chunks").glob("*.parquet"))
    assert kept  # two batches of 4 make a chunk of 8: at least one finished
    second = ThreadSafe()
    _run_on_two_threads(second, easy_vqa_eval, out)
    n = store.read_questions(easy_vqa_eval["questions"]).num_rows
    assert second.answered == n - 8 * len(kept)
    assert pq.read_table(out).num_rows == n


class Cached(SharesImageFeatures):
    """Encodes through the shared cache; its first batches of two calls on two threads
    wait for each other, so that both calls are in flight at once."""

    thread_safe = True

    def __init__(self) -> None:
        super().__init__(batch_size=1)
        self.barrier = threading.Barrier(2, timeout=20)
        self.seen: list[set[str]] = []

    def answer(self, images, questions):
        features = self.image_features(images, lambda ims: [im.label for im in ims])
        if not self.barrier.broken:
            self.barrier.wait()
        self.seen.append(set(self._calls.current.features.values()))
        return features


class Labelled:
    def __init__(self, label: str) -> None:
        self.label = label


def test_calls_on_two_threads_keep_their_own_image_features():
    """Two calls at once, about different images: each answers from its own images, and
    each call's cache holds only its own."""
    model = Cached()
    a, b, c, d = (Labelled(x) for x in "abcd")
    results: dict[str, list] = {}

    def call(name, images):
        results[name] = model.answer_all(images, ["q", "q"])

    threads = [
        threading.Thread(target=call, args=("one", [a, b])),
        threading.Thread(target=call, args=("two", [c, d])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"one": ["a", "b"], "two": ["c", "d"]}
    assert not model.barrier.broken
    assert all(seen <= {"a", "b"} or seen <= {"c", "d"} for seen in model.seen)


def test_the_classifier_guards_its_tokenizer_and_vilts_patch_draw(checkpoints, monkeypatch):
    """What two threads of a ViLT classifier must not do at once runs under its lock: the
    tokenizer (a call sets its padding settings) and the patch choice drawn from torch's
    global generator (seeded per image)."""
    from PIL import Image

    import vqarobust.models.classifier as classifier
    from vqarobust.models import load_model

    spec = {"family": "vqa-classifier", "path_or_id": str(checkpoints["vilt"])}
    model = load_model(spec, "vilt", "cpu")
    checks: list[tuple[str, bool]] = []
    tokenizer = model.processor.tokenizer
    embed = model.model.vilt.embeddings.visual_embed

    class Watched:
        def __getattr__(self, name):
            return getattr(tokenizer, name)

        def __call__(self, *args, **kwargs):
            checks.append(("tokenizer", model._tokenizer_lock.locked()))
            return tokenizer(*args, **kwargs)

    def watched_embed(*args, **kwargs):
        checks.append(("patches", classifier._GLOBAL_GENERATOR.locked()))
        return embed(*args, **kwargs)

    monkeypatch.setattr(model.processor, "tokenizer", Watched())
    monkeypatch.setattr(model.model.vilt.embeddings, "visual_embed", watched_embed)
    image = Image.new("RGB", (32, 32), "red")
    model.answer_all([image, image], ["what color?", "what shape?"])
    model.truncated(["what color?"])
    assert {name for name, _ in checks} == {"tokenizer", "patches"}
    assert all(held for _, held in checks)
