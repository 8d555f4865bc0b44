"""Run one model over several subsets of a dataset (perturbed images or perturbed
questions) and collect its predictions."""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from vqarobust import store
from vqarobust.devices import lease_device
from vqarobust.digests import text_sha256
from vqarobust.environment import machine
from vqarobust.metering import COST_KEY, CostMeter, add_costs, chunk_cost, total_cost
from vqarobust.models import ModelRef, family_code_digest
from vqarobust.models.base import VQAModel, resolved_precision
from vqarobust.models.identity import resolve_checkpoints
from vqarobust.models.replies import FAILED
from vqarobust.progress import Progress
from vqarobust.resume import (
    KEY_LENGTH,
    ChunkStore,
    Digests,
    SubsetInputs,
    job_fingerprint,
    subset_fingerprint,
    subset_key,
)
from vqarobust.storage_paths import workflow_path

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Subset:
    """One perturbed version of the dataset: (modality, perturbation, severity).

    ``images_dir`` holds the images asked about (the clean ones for text perturbations);
    ``questions_path`` a perturbed question set (``store.QUESTION_SET_SCHEMA``) whose
    ``perturbed`` text is asked instead of the dataset's question, or None.
    """

    perturbation: str
    severity: int
    images_dir: str
    modality: str = "image"
    questions_path: str | None = None
    # "features": ``images_dir`` is a feature table (region-feature models, LXMERT) and
    # ``swaps_path`` the feature swaps of a context subset.
    inputs: str = "images"
    swaps_path: str | None = None

    def __post_init__(self) -> None:
        # The clean subset is severity 0 of every modality; it gets its own name.
        if self.perturbation == "clean":
            object.__setattr__(self, "modality", "clean")


def decode_images(shards: store.ImageShards, image_ids: Sequence[int]) -> dict[int, Image.Image]:
    """Decode the given images of a subset (each once), naming any that does not decode."""
    images = {}
    for image_id, data in shards.read(image_ids).items():
        try:
            images[image_id] = Image.fromarray(store.decode_image(data))
        except Exception as exc:
            raise ValueError(f"{shards.directory}: image {image_id} does not decode") from exc
    return images


class _DecodedImages:
    """An image folder as the inference loop reads it: ids, and decoded images."""

    def __init__(self, directory: str) -> None:
        self.shards = store.ImageShards(directory)
        self.directory = directory

    def __contains__(self, image_id: object) -> bool:
        return image_id in self.shards

    def read(self, image_ids: Sequence[int]) -> dict[int, Any]:
        return decode_images(self.shards, image_ids)


def open_inputs(subset: Subset) -> Any:
    """What the model is asked about, by image id: decoded images, or region features
    (with the subset's feature swaps made)."""
    if subset.inputs == "features":
        from vqarobust.features.reader import FeatureReader

        return FeatureReader(subset.images_dir, subset.swaps_path)
    if subset.inputs != "images":
        raise ValueError(f"subset inputs are images or features, not {subset.inputs!r}")
    return _DecodedImages(subset.images_dir)


def predict_subset(
    model: VQAModel,
    questions: pa.Table,
    subset: Subset,
    model_name: str,
    images: dict[int, Image.Image] | None = None,
    progress: Callable[[int], None] | None = None,
) -> pa.Table:
    """Answer every question about the subset's images; a table of PREDICTION_SCHEMA.

    ``images`` (image id -> decoded image) saves decoding the chunk's images again;
    ``progress`` is told how many questions each finished batch answered.
    """
    if images is None:
        source = open_inputs(subset)
        wanted = questions.column("image_id").unique().to_pylist()
        images = source.read([i for i in wanted if i in source])
    image_ids = questions.column("image_id").to_pylist()
    missing = sorted({i for i in image_ids if i not in images})
    if missing:
        raise ValueError(
            f"{subset.images_dir}: {len(missing)} images asked about are missing, "
            f"e.g. {missing[:10]}"
        )
    texts = questions.column("question").to_pylist()
    responses = model.respond([images[i] for i in image_ids], texts, progress)
    n = questions.num_rows
    return pa.table(
        {
            "question_id": questions.column("question_id"),
            "answer": pa.array(responses.answers, pa.string()),
            "raw_answer": pa.array(responses.raw, pa.string()),
            "model": pa.array([model_name] * n, pa.string()),
            "modality": pa.array([subset.modality] * n, pa.string()),
            "perturbation": pa.array([subset.perturbation] * n, pa.string()),
            "severity": pa.array([subset.severity] * n, store.SEVERITY),
            "truncated": pa.array(model.truncated(texts), pa.bool_()),
            "status": pa.array(responses.status, pa.string()),
            "finish_reason": pa.array(responses.finish_reason, pa.string()),
        },
        schema=store.PREDICTION_SCHEMA,
    )


def job_subsets(
    name: str, modality: str, severities: Sequence[int] | None, inputs: Any
) -> list[Subset]:
    """The :class:`Subset` of each severity of subset ``name`` in a run_model job, from
    the job's inputs named ``<kind>__<name>`` (images or features, question_sets, swaps;
    :meth:`vqarobust.plan.infer.InferStage.job_input`)."""

    def get(kind: str) -> Any:
        return inputs.get(f"{kind}__{name}")

    question_sets, features = get("question_sets"), get("features")
    # A feature model (LXMERT) reads feature tables where the others read image folders.
    folders, kind = (features, "features") if features else (get("images"), "images")
    if modality == "context":
        # One question set and one image folder (or feature table) hold every swap index.
        severities = context_severities(question_sets[0])
        sets = list(question_sets) * len(severities)
        images = [folders[0]] * len(severities)
    elif question_sets:
        # Perturbed questions about the clean images.
        sets = list(question_sets)
        images = [folders[0]] * len(sets)
    else:
        sets, images = [None] * len(severities or []), list(folders)
    swaps = get("swaps") or None
    return [
        Subset(name, severity, image_dir, modality, question_set, kind, swaps)
        for severity, image_dir, question_set in zip(severities, images, sets, strict=True)
    ]


def context_severities(path: str | os.PathLike[str]) -> list[int]:
    """The severities of a context question set: every swap index it holds, ascending
    (a question's swaps of one kind are numbered 1..objects x k, with no fixed top)."""
    column = pq.read_table(path, columns=["severity"]).column("severity")
    return sorted(int(s) for s in pc.unique(column).to_pylist())


def subset_questions(questions: pa.Table, subset: Subset) -> pa.Table:
    """The questions asked on ``subset``: the dataset's, or its perturbed question set
    (same question ids, the ``perturbed`` text as ``question``), in image order.

    A ``context`` subset's set holds every severity of its perturbation and only the
    questions that have a swap of that severity, each about its own swapped image: those
    questions are asked, about the set's ``image_id``.
    """
    if subset.modality == "context":
        rows = pq.read_table(subset.questions_path, columns=["question_id", "image_id", "severity"])
        rows = rows.filter(pc.equal(rows.column("severity"), subset.severity))
        row_of = {q: i for i, q in enumerate(questions.column("question_id").to_pylist())}
        ids = rows.column("question_id").to_pylist()
        unknown = [i for i in ids if i not in row_of]
        if unknown:
            raise ValueError(
                f"{subset.questions_path}: question ids not in the dataset, e.g. {unknown[:5]}"
            )
        asked = questions.take(pa.array([row_of[i] for i in ids], pa.int64()))
        asked = asked.set_column(
            asked.schema.get_field_index("image_id"), "image_id", rows.column("image_id")
        )
        return asked.sort_by([("image_id", "ascending"), ("question_id", "ascending")])
    if subset.questions_path is not None:
        perturbed = pq.read_table(subset.questions_path, columns=["question_id", "perturbed"])
        ids = set(questions.column("question_id").to_pylist())
        if set(perturbed.column("question_id").to_pylist()) != ids:
            raise ValueError(
                f"{subset.questions_path}: question ids differ from the dataset's questions"
            )
        lookup = dict(
            zip(
                perturbed.column("question_id").to_pylist(),
                perturbed.column("perturbed").to_pylist(),
                strict=True,
            )
        )
        texts = [lookup[i] for i in questions.column("question_id").to_pylist()]
        questions = questions.set_column(
            questions.schema.get_field_index("question"), "question", pa.array(texts, pa.string())
        )
        # A null text: the fidelity filter dropped the question from this set.
        dropped = questions.column("question").null_count
        if dropped:
            log.info(
                "%s: %d questions dropped by the fidelity filter are not asked",
                subset.questions_path,
                dropped,
            )
            questions = questions.filter(pc.is_valid(questions.column("question")))
    return questions


def run_inference(
    ref: ModelRef,
    questions_path: str | os.PathLike[str],
    subsets: Sequence[Subset],
    out_path: str | os.PathLike[str],
    device: str | None = None,
    chunk_size: int = 1024,
    threads: int = 1,
) -> int:
    """:func:`run_model_job` with one output: every severity of one subset in one file.
    Returns the number of predictions."""
    outputs = [(subsets, out_path)]
    return run_model_job(ref, questions_path, outputs, device, chunk_size, threads)[0]


def run_model_job(
    ref: ModelRef,
    questions_path: str | os.PathLike[str],
    outputs: Sequence[tuple[Sequence[Subset], str | os.PathLike[str]]],
    device: str | None = None,
    chunk_size: int = 1024,
    threads: int = 1,
    then: Callable[[JobModel], object] | None = None,
) -> list[int]:
    """Load the model at most once, answer every question on every subset of every output,
    and write each output's Parquet file (a run_model job: one model on all its subsets,
    or on one). ``threads``: the job's CPU threads (:func:`job_workers` says how they
    are used).

    ``ref.spec`` is what can change answers (it fingerprints finished work);
    ``ref.options`` (batch size, ...) only how the model runs. Questions are taken in chunks of
    ``chunk_size``, in image order, and only the images of the current chunk are decoded,
    so memory stays flat however large the subset. Each finished chunk is kept in
    ``<out_path>.chunks/`` under its subset's key, the digest of everything the subset's
    answers depend on (:mod:`vqarobust.resume`): a killed job, or a job rerun with a
    severity added, computes only the chunks it has not got. The model is loaded only when
    a chunk is missing, once for all outputs. The job's fingerprint is stored in each
    output's Parquet metadata (key ``vqarobust.inputs``), with its times and the model's
    parameter count.

    Without ``device``, the job leases one as the entry's ``device`` asks (see
    :func:`vqarobust.devices.lease_device`): ``cuda`` fails without a free GPU rather
    than running on the CPU. Returns each output's number of predictions.

    ``then``, if given, is called once the outputs are written, in the same lease, with the
    job's fingerprint and its model (:class:`JobModel`): what else the job draws from the
    weights (its attention maps) costs no second load, and loads them only if it needs
    them.
    """
    if device is None:
        policy = ref.spec.get("device", "auto")
        with lease_device(policy=policy, who=f"model {ref.name!r}") as leased:
            return run_model_job(ref, questions_path, outputs, leased, chunk_size, threads, then)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    # Image order keeps a chunk's questions on few images (and few row groups).
    questions = store.read_questions(questions_path).sort_by(
        [("image_id", "ascending"), ("question_id", "ascending")]
    )
    digest = Digests()
    loader, job = _prepare_job(ref, device, digest(questions_path), chunk_size, threads)
    job_key = text_sha256(json.dumps(job, sort_keys=True, default=str))[:KEY_LENGTH]
    planned = []
    for subsets, out_path in outputs:
        parts = [subset_fingerprint(_inputs(s), digest) for s in subsets]
        keys = [subset_key(job, part) for part in parts]
        chunks = ChunkStore(out_path)
        chunks.open({k: {"job": job, "subset": p} for k, p in zip(keys, parts, strict=True)})
        # Whichever output loads the model counts its parameters for every output.
        loader.counted.append(chunks.parameters(job_key))
        planned.append(_Output(list(subsets), out_path, parts, keys, chunks))
    run = _Run(questions, job, job_key, loader, chunk_size, threading.local())
    counts = _write_outputs(planned, run)
    if then is not None:
        then(JobModel(job, digest, loader))
    return counts


# The module a per-model run_model job draws its attention maps with, once it has
# answered. Its script imports it by name, and the plan adds its code to the digest of
# only those jobs (vqarobust.plan.study), so that an edit of it reruns no per-subset job.
ATTENTION_MODULE = "vqarobust.attention"


@dataclass(frozen=True)
class JobModel:
    """What a run_model job's ``then`` step gets: the job's fingerprint (what its answers
    depend on: :func:`vqarobust.resume.job_fingerprint`), its file digests, and its model,
    loaded by the first call to ``load`` unless the answers already loaded it."""

    fingerprint: dict[str, Any]
    digest: Digests
    load: Callable[[], VQAModel]


def _prepare_job(
    ref: ModelRef, device: str, questions: str | None, chunk_size: int, threads: int = 1
) -> tuple[_Loader, dict[str, Any]]:
    """The job's loader and fingerprint. The weights are resolved (downloaded if allowed)
    before they are fingerprinted, and the adapter loads the resolved files: the recorded
    commit is the one that ran."""
    allow_download = bool({**ref.spec, **(ref.options or {})}.get("allow_download", False))
    resolved = resolve_checkpoints(ref.spec, ref.name, allow_download)
    resolved = replace(resolved, identity=workflow_identity(resolved.identity))
    code = family_code_digest(ref.spec.get("family"))
    precision = resolved_precision(ref.spec, device)
    loader = _Loader(replace(ref, spec=resolved.entry), device, precision, [], threads)
    if ref.spec.get("family") == "openai-chat":
        # Which model the server answers as keys its chunks: another model behind the same
        # name and address reuses none of them.
        resolved.identity["model"].update(loader().identity())
    job = job_fingerprint(
        ref.name, ref.spec, resolved.identity, code, questions, device, chunk_size
    )
    return loader, job


def workflow_identity(identity: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Checkpoint identities with each local folder named by its workflow path: a job on
    object storage loads a local copy (:mod:`vqarobust.storage_paths`), and its tables
    name the checkpoint as a local run's do."""
    return {
        key: {**value, "path": workflow_path(value["path"])} if "path" in value else value
        for key, value in identity.items()
    }


@dataclass(frozen=True)
class _Output:
    """One output file of a job: its subsets, their fingerprints and keys, its chunks."""

    subsets: list[Subset]
    path: str | os.PathLike[str]
    parts: list[dict[str, Any]]
    keys: list[str]
    chunks: ChunkStore


@dataclass(frozen=True)
class _Run:
    """What every output of a job shares."""

    questions: pa.Table
    job: dict[str, Any]
    job_key: str
    loader: _Loader
    chunk_size: int
    # Each thread's image readers (a Parquet file is read by one thread at a time).
    readers: threading.local


@dataclass
class _SubsetWork:
    """One subset of an output: the questions asked, its chunks' files in order, those
    still to answer, and the progress of answering them."""

    subset: Subset
    output: int
    asked: pa.Table
    files: list[Path]
    todo: list[tuple[int, pa.Table]]  # (index in files, the chunk's questions)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _progress: Progress | None = None

    def begin(self, model: str, shards: Any) -> Progress:
        """The subset's progress, started by its first chunk to run, which also checks
        that every image the subset asks about is there."""
        with self.lock:
            if self._progress is None:
                wanted = set(self.asked.column("image_id").to_pylist())
                missing = sorted(i for i in wanted if i not in shards)
                if missing:
                    raise ValueError(
                        f"{self.subset.images_dir}: {len(missing)} images asked about are "
                        f"missing, e.g. {missing[:10]}"
                    )
                n = sum(chunk.num_rows for _, chunk in self.todo)
                name = f"{model} {self.subset.perturbation}/{self.subset.severity}"
                self._progress = Progress(name, n, "questions", log)
            return self._progress


def _write_outputs(planned: list[_Output], run: _Run) -> list[int]:
    """Answer what is missing of every output and write each with its record, in order;
    each output's row count. The chunks to answer run one after the other, or as many at
    once as the job has workers (:func:`job_workers`), each output written as soon as its
    own are done."""
    work = [
        [
            _subset_work(i, output, subset, key, run)
            for subset, key in zip(output.subsets, output.keys, strict=True)
        ]
        for i, output in enumerate(planned)
    ]
    todo = sum(len(w.todo) for subsets in work for w in subsets)
    if todo:
        run.loader()  # once, before any worker starts
    # Fewer chunks to answer than threads: as many workers as chunks; a single chunk runs
    # on all of torch's threads (the job's script set them).
    most = job_workers(run.loader.model, run.loader.device, run.loader.threads)[0] if todo else 1
    workers = run.loader.workers = min(most, max(todo, 1))
    if todo and run.loader.threads > 1:
        torch_threads = 1 if workers > 1 else run.loader.threads
        name = run.loader.ref.name
        log.info("%s: %d chunk(s) at once on %d torch thread(s) each", name, workers, torch_threads)
    if workers == 1:
        return [
            _finish_output(output, subsets, run, _answer_inline(subsets, run))
            for output, subsets in zip(planned, work, strict=True)
        ]
    return _answer_on_threads(planned, work, run, workers)


def _answer_on_threads(
    planned: list[_Output], work: list[list[_SubsetWork]], run: _Run, workers: int
) -> list[int]:
    """:func:`_write_outputs` with the chunks on ``workers`` threads, one torch thread
    each (set in each thread too: a library may read its thread's own setting)."""
    import torch

    with (
        _one_torch_thread(),
        ThreadPoolExecutor(
            workers, thread_name_prefix="chunks", initializer=torch.set_num_threads, initargs=(1,)
        ) as pool,
    ):
        futures = [
            [[pool.submit(_answer_chunk, w, k, chunk, run) for k, chunk in w.todo] for w in subsets]
            for subsets in work
        ]
        try:
            return [
                _finish_output(output, subsets, run, [[f.result() for f in fs] for fs in done])
                for output, subsets, done in zip(planned, work, futures, strict=True)
            ]
        except BaseException:
            # Chunks already running finish and are kept (a rerun reuses them); the
            # first failure is raised, the others logged.
            pool.shutdown(cancel_futures=True)
            failed = [
                f.exception()
                for f in (f for done in futures for fs in done for f in fs)
                if f.done() and not f.cancelled() and f.exception() is not None
            ]
            for error in failed[1:]:
                log.error("another chunk failed too: %r", error)
            raise


@contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Torch's own threads set to one while chunks run on threads, then set back."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _answer_inline(subsets: list[_SubsetWork], run: _Run) -> list[list[tuple[Path, float]]]:
    return [[_answer_chunk(w, k, chunk, run) for k, chunk in w.todo] for w in subsets]


def _subset_work(index: int, output: _Output, subset: Subset, key: str, run: _Run) -> _SubsetWork:
    """The chunks of one subset and which of them are still to answer."""
    asked = subset_questions(run.questions, subset)
    starts = range(0, asked.num_rows, run.chunk_size)
    files = [output.chunks.chunk(key, k) for k in starts]
    todo = [
        (i, asked.slice(k, run.chunk_size))
        for i, (k, f) in enumerate(zip(starts, files, strict=True))
        if not f.exists()
    ]
    if len(todo) < len(files):
        name = f"{run.loader.ref.name} {subset.perturbation}/{subset.severity}"
        log.info("%s: reusing %d of %d finished chunks", name, len(files) - len(todo), len(files))
    return _SubsetWork(subset, index, asked, files, todo)


def _reader(run: _Run, output: int, subset: Subset) -> Any:
    """This thread's reader of the subset's images. One reader per folder and output: a
    context output's severities share one feature table and one swap table; the next
    output's folders replace them."""
    mine = run.readers
    if getattr(mine, "output", None) != output:
        mine.output, mine.by_folder = output, {}
    key = (subset.inputs, subset.images_dir, subset.swaps_path)
    if key not in mine.by_folder:
        mine.by_folder[key] = open_inputs(subset)
    return mine.by_folder[key]


def _finish_output(
    output: _Output, work: list[_SubsetWork], run: _Run, answered: list[list[tuple[Path, float]]]
) -> int:
    """Write one output, its chunks answered, with its record; its row count."""
    files, costs, starts = [], [], []
    for w, done in zip(work, answered, strict=True):
        for (k, _), (path, started) in zip(w.todo, done, strict=True):
            w.files[k] = path
            starts.append(started)
        files += w.files
        cost = total_cost(w.files)
        if cost is not None:  # a chunk kept from before costs were recorded: unknown
            cell = {"modality": w.subset.modality, "perturbation": w.subset.perturbation}
            costs.append({**cell, "severity": w.subset.severity, **cost})
    counted = output.chunks.parameters(run.job_key)
    finished = time.time()
    record = {
        "inputs": {**run.job, "subsets": output.parts},
        "started": min(starts, default=finished),
        "finished": finished,
        "parameters": json.loads(counted.read_text()) if counted.exists() else None,
        "machine": machine(),
        "costs": costs,
        "load_s": run.loader.load_s,
        "served_as": sorted(run.loader.served_as(), key=str),
    }
    table = output.chunks.merge(files).replace_schema_metadata(
        {store.INPUTS_KEY: json.dumps(record, sort_keys=True, default=str).encode("utf-8")}
    )
    store.write_table(table, output.path)
    output.chunks.prune(output.keys, run.job_key)
    return table.num_rows


def _inputs(subset: Subset) -> SubsetInputs:
    return SubsetInputs(
        f"{subset.modality}/{subset.perturbation}/{subset.severity}",
        subset.images_dir,
        subset.questions_path,
        subset.swaps_path,
    )


@dataclass
class _Loader:
    """The job's model, loaded at the first chunk that needs it (once for all the job's
    outputs), checked to compute in the precision its fingerprint names; its parameter
    count kept beside every output's chunks."""

    ref: ModelRef
    device: str
    precision: dict[str, str]
    counted: list[Path]
    threads: int = 1
    model: VQAModel | None = None
    load_s: float | None = None
    workers: int = 1  # chunks answered at once: set by _write_outputs once loaded

    def served_as(self) -> list[list[str | None]]:
        """The (model, system_fingerprint) pairs a served model's replies named; one pair
        in a sound job (:meth:`check_identity`)."""
        return [list(pair) for pair in getattr(self.model, "identities", set())]

    def check_identity(self) -> None:
        """Fail before a chunk is kept whose replies came from two served models."""
        pairs = self.served_as()
        if len(pairs) > 1:
            raise RuntimeError(
                f"model {self.ref.name!r}: the server's replies named more than one model "
                f"(model, system_fingerprint): {sorted(pairs, key=str)}; answers of two "
                "models would mix in one table. Rerun once the server is stable: chunks of "
                "another identity are not reused."
            )

    def __call__(self) -> VQAModel:
        if self.model is None:
            t0 = time.perf_counter()
            self.model = self.ref.load(self.device)
            self.load_s = time.perf_counter() - t0
            log.info(
                "loaded %s on %s (%s) in %.1fs",
                self.ref.name,
                self.device,
                self.precision["dtype"],
                time.perf_counter() - t0,
            )
            dtype = getattr(self.model, "dtype", None)
            if dtype is not None and str(dtype).removeprefix("torch.") != self.precision["dtype"]:
                raise RuntimeError(
                    f"model {self.ref.name!r} loaded in {dtype}, but its answers are "
                    f"fingerprinted as {self.precision['dtype']}"
                )
            count = json.dumps(self.model.parameter_count())
            for path in self.counted:
                with store.atomic_path(path) as tmp:
                    tmp.write_text(count)
        return self.model


def job_workers(model: VQAModel, device: str, threads: int) -> tuple[int, int]:
    """How a job of ``threads`` CPU threads runs its model: (chunks at once, torch
    threads each). On the CPU a ``thread_safe`` adapter answers ``threads`` chunks at
    once, each on its own thread with one torch thread (vilt-tiny's forward gains more so
    than on torch's own threads: docs/performance.md); any other model, or a GPU, one
    chunk at a time on ``threads`` torch threads."""
    if threads > 1 and device.startswith("cpu") and model.thread_safe:
        return threads, 1
    return 1, threads


def _answer_chunk(work: _SubsetWork, index: int, chunk: pa.Table, run: _Run) -> tuple[Path, float]:
    """Answer one chunk (of a partial chunk, only its failed requests) and keep it with
    its cost: as finished, or as partial while requests of it failed. Its file, and when
    it started. A chunk some of whose requests failed is kept as partial: a rerun asks
    only those again."""
    started = time.time()
    loader, subset = run.loader, work.subset
    model = loader()
    path = work.files[index]
    partial = ChunkStore.partial(path)
    before = pq.read_table(partial) if partial.exists() else None
    if before is not None:
        # Only the failed requests are asked again; the answered rows stay.
        failed = pc.equal(before.column("status"), FAILED)
        redo = set(before.filter(failed).column("question_id").to_pylist())
        log.info("%s: asking the %d failed requests of a partial chunk again", partial, len(redo))
        chunk = chunk.filter(pc.is_in(chunk.column("question_id"), pa.array(sorted(redo))))
    # Chunks on threads each count their own thread's CPU time.
    meter = CostMeter(model, loader.device, per_thread=loader.workers > 1)
    shards = _reader(run, work.output, subset)
    progress = work.begin(loader.ref.name, shards)
    images = shards.read(chunk.column("image_id").unique().to_pylist())
    answered = predict_subset(model, chunk, subset, loader.ref.name, images, progress.advance)
    loader.check_identity()
    cost = meter.stop(answered.num_rows)
    if before is not None:
        answered = _replace_rows(before, answered)
        cost = add_costs(chunk_cost(before), cost)
    answered = answered.replace_schema_metadata({COST_KEY: json.dumps(cost).encode()})
    if pc.any(pc.equal(answered.column("status"), FAILED)).as_py():
        store.write_table(answered, partial)
        return partial, started
    store.write_table(answered, path)
    partial.unlink(missing_ok=True)
    return path, started


def _replace_rows(before: pa.Table, again: pa.Table) -> pa.Table:
    """``before`` with the rows of ``again`` (same question ids) in their place, in
    ``before``'s order."""
    again_ids = again.column("question_id")
    kept = before.filter(pc.invert(pc.is_in(before.column("question_id"), again_ids)))
    merged = pa.concat_tables([kept.cast(store.PREDICTION_SCHEMA), again])
    order = {q: i for i, q in enumerate(before.column("question_id").to_pylist())}
    rank = [order[q] for q in merged.column("question_id").to_pylist()]
    return merged.take(pa.array(sorted(range(len(rank)), key=rank.__getitem__)))


def input_fingerprint(
    model_name: str,
    spec: dict[str, Any],
    questions_path: str | os.PathLike[str],
    subsets: Sequence[Subset],
    chunk_size: int,
    device: str = "cpu",
) -> dict[str, Any]:
    """What a job's answers depend on, by content, as its output's metadata records it:
    :func:`~vqarobust.resume.job_fingerprint` with each subset's
    :func:`~vqarobust.resume.subset_fingerprint` under ``subsets``."""
    digest = Digests()
    identity = workflow_identity(resolve_checkpoints(spec, model_name).identity)
    code = family_code_digest(spec.get("family"))
    job = job_fingerprint(
        model_name, spec, identity, code, digest(questions_path), device, chunk_size
    )
    return {**job, "subsets": [subset_fingerprint(_inputs(s), digest) for s in subsets]}
