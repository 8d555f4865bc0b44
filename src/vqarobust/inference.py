"""Run one model over several subsets of a dataset (perturbed images or perturbed
questions) and collect its predictions."""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from PIL import Image

from vqarobust import store
from vqarobust.devices import lease_device
from vqarobust.digests import tree_sha256
from vqarobust.models import ModelRef
from vqarobust.models.base import VQAModel
from vqarobust.models.identity import checkpoint_identity
from vqarobust.progress import Progress

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
    answers = model.answer_all([images[i] for i in image_ids], texts, progress)
    n = questions.num_rows
    return pa.table(
        {
            "question_id": questions.column("question_id"),
            "answer": pa.array(answers, pa.string()),
            "model": pa.array([model_name] * n, pa.string()),
            "modality": pa.array([subset.modality] * n, pa.string()),
            "perturbation": pa.array([subset.perturbation] * n, pa.string()),
            "severity": pa.array([subset.severity] * n, pa.int8()),
            "truncated": pa.array(model.truncated(texts), pa.bool_()),
        },
        schema=store.PREDICTION_SCHEMA,
    )


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
            zip(perturbed.column("question_id").to_pylist(),
                perturbed.column("perturbed").to_pylist(), strict=True)
        )  # fmt: skip
        texts = [lookup[i] for i in questions.column("question_id").to_pylist()]
        questions = questions.set_column(
            questions.schema.get_field_index("question"), "question", pa.array(texts, pa.string())
        )
        # A null text: the fidelity filter dropped the question from this set.
        dropped = questions.column("question").null_count
        if dropped:
            log.info("%s: %d questions dropped by the fidelity filter are not asked",
                     subset.questions_path, dropped)  # fmt: skip
            questions = questions.filter(pc.is_valid(questions.column("question")))
    return questions


def run_inference(
    ref: ModelRef,
    questions_path: str | os.PathLike[str],
    subsets: Sequence[Subset],
    out_path: str | os.PathLike[str],
    device: str | None = None,
    chunk_size: int = 1024,
) -> int:
    """Load the model once, answer every question on every subset, write one Parquet file.

    ``ref.spec`` is what can change answers (it fingerprints resumed work);
    ``ref.options`` (batch size, ...) only how the model runs. Questions are taken in chunks of
    ``chunk_size``, in image order, and only the images of the current chunk are decoded,
    so memory stays flat however large the subset. Each finished chunk is kept in
    ``<out_path>.partial/``, so a killed job restarted with the same inputs only computes
    what is missing, but only when the *content* of everything the answers depend on is
    unchanged (:func:`input_fingerprint`); otherwise the chunks are discarded and the log
    names what changed. The fingerprint is stored in the output's Parquet metadata
    (key ``vqarobust.inputs``), with the job's times and the model's parameter count.
    The chunks are merged into ``out_path`` (atomically) and the partial folder is
    removed at the end.

    Without ``device``, the job leases one as the entry's ``device`` asks (see
    :func:`vqarobust.devices.lease_device`): ``cuda`` fails without a free GPU rather
    than running on the CPU. Returns the number of predictions.
    """
    model_name, spec = ref.name, dict(ref.spec)
    if device is None:
        policy = spec.get("device", "auto")
        with lease_device(policy=policy, who=f"model {model_name!r}") as leased:
            return run_inference(ref, questions_path, subsets, out_path, leased, chunk_size)
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    # Image order keeps a chunk's questions on few images (and few row groups).
    questions = store.read_questions(questions_path).sort_by(
        [("image_id", "ascending"), ("question_id", "ascending")]
    )
    started = time.time()
    fingerprint = input_fingerprint(model_name, spec, questions_path, subsets, chunk_size)
    partial = _partial_dir(out_path, fingerprint)
    model: VQAModel | None = None
    chunk_files = []
    # One reader per folder (a context job's severities share one feature table and one
    # swap table: read them once).
    readers: dict[tuple, Any] = {}
    for subset in subsets:
        asked_questions = subset_questions(questions, subset)
        starts = range(0, asked_questions.num_rows, chunk_size)
        files = [
            partial / f"{subset.perturbation}-{subset.severity}-{k:05d}.parquet" for k in starts
        ]
        chunk_files += files
        todo = [(k, f) for k, f in zip(starts, files, strict=True) if not f.exists()]
        if len(todo) < len(files):
            done = len(files) - len(todo)
            log.info("%s %s/%d: resuming, %d of %d chunks already done", model_name,
                     subset.perturbation, subset.severity, done, len(files))  # fmt: skip
        if not todo:
            continue
        key = (subset.inputs, subset.images_dir, subset.swaps_path)
        if key not in readers:
            readers[key] = open_inputs(subset)
        shards = readers[key]
        asked = set(asked_questions.column("image_id").to_pylist())
        missing = sorted(i for i in asked if i not in shards)
        if missing:
            raise ValueError(
                f"{subset.images_dir}: {len(missing)} images asked about are missing, "
                f"e.g. {missing[:10]}"
            )
        if model is None:
            t0 = time.perf_counter()
            model = ref.load(device)
            log.info("loaded %s on %s in %.1fs", model_name, device, time.perf_counter() - t0)
            # Kept with the chunks, so a job that resumes without loading still knows it.
            with store.atomic_path(partial / "parameters.json") as tmp:
                tmp.write_text(json.dumps(model.parameter_count()))
        n = sum(min(chunk_size, asked_questions.num_rows - k) for k, _ in todo)
        progress = Progress(f"{model_name} {subset.perturbation}/{subset.severity}", n,
                            "questions", log)  # fmt: skip
        for start, path in todo:
            chunk = asked_questions.slice(start, chunk_size)
            images = shards.read(chunk.column("image_id").unique().to_pylist())
            answered = predict_subset(model, chunk, subset, model_name, images, progress.advance)
            store.write_table(answered, path)
    tables = [pq.read_table(f) for f in chunk_files]
    table = pa.concat_tables(tables).cast(store.PREDICTION_SCHEMA) if tables else (
        store.PREDICTION_SCHEMA.empty_table())  # fmt: skip
    # The fingerprint travels with the predictions: provenance reads it from there.
    counted = partial / "parameters.json"
    parameters = json.loads(counted.read_text()) if counted.exists() else None
    record = {"inputs": fingerprint, "started": started, "finished": time.time(),
              "parameters": parameters}  # fmt: skip
    table = table.replace_schema_metadata(
        {store.INPUTS_KEY: json.dumps(record, sort_keys=True, default=str).encode("utf-8")}
    )
    store.write_table(table, out_path)
    shutil.rmtree(partial)
    return table.num_rows


def input_fingerprint(
    model_name: str,
    spec: dict[str, Any],
    questions_path: str | os.PathLike[str],
    subsets: Sequence[Subset],
    chunk_size: int,
) -> dict[str, Any]:
    """What a job's answers depend on, by content: the answer-relevant spec, the weights
    (:func:`~vqarobust.models.identity.checkpoint_identity`), the questions file's SHA-256
    and, per subset, the SHA-256 of its image shards and of its question set.

    Each file is read once per job (a folder shared by several subsets is hashed once).
    """
    digests: dict[str, str] = {}

    def digest(path: str | os.PathLike[str] | None) -> str | None:
        if path is None:
            return None
        key = str(path)
        if key not in digests:
            digests[key] = tree_sha256(key)
        return digests[key]

    return {
        "model": model_name,
        "spec": spec,
        "checkpoint": checkpoint_identity(spec),
        "questions": digest(questions_path),
        "subsets": [
            {
                "subset": f"{s.modality}/{s.perturbation}/{s.severity}",
                "images": digest(s.images_dir),
                "question_set": digest(s.questions_path),
                **({"swaps": digest(s.swaps_path)} if s.swaps_path else {}),
            }
            for s in subsets
        ],
        "chunk_size": chunk_size,
    }


def changed_inputs(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """Readable names of what differs between two fingerprints (empty when none does)."""
    changed = []
    for key in ("model", "spec", "questions", "chunk_size"):
        if old.get(key) != new.get(key):
            changed.append({"questions": "the questions file"}.get(key, f"the model {key}"))
    old_ck, new_ck = old.get("checkpoint", {}), new.get("checkpoint", {})
    for key in sorted(set(old_ck) | set(new_ck)):
        if old_ck.get(key) != new_ck.get(key):
            changed.append(f"the weights ({key})")
    old_subsets = {s["subset"]: s for s in old.get("subsets", [])}
    new_subsets = {s["subset"]: s for s in new.get("subsets", [])}
    if list(old_subsets) != list(new_subsets):
        changed.append("the list of subsets")
    for name, sub in new_subsets.items():
        before = old_subsets.get(name)
        if before is None:
            continue
        for part, label in (("images", "images"), ("question_set", "question set"),
                            ("swaps", "feature swaps")):  # fmt: skip
            if before.get(part) != sub.get(part):
                changed.append(f"the {label} of {name}")
    return changed


def _partial_dir(out_path: str | os.PathLike[str], fingerprint: dict[str, Any]) -> Path:
    """The folder of finished chunks; emptied, saying why, when it belongs to other inputs."""
    partial = Path(f"{out_path}.partial")
    text = json.dumps(fingerprint, sort_keys=True, default=str)
    meta = partial / "inputs.json"
    if partial.exists():
        try:
            old = json.loads(meta.read_text()) if meta.exists() else None
        except json.JSONDecodeError:
            old = None
        if old != json.loads(text):
            why = "no readable inputs.json" if old is None else ", ".join(
                changed_inputs(old, fingerprint)) or "their inputs differ"  # fmt: skip
            log.warning("discarding partial results in %s: changed since they were computed: "
                        "%s", partial, why)  # fmt: skip
            shutil.rmtree(partial)
    partial.mkdir(parents=True, exist_ok=True)
    if not meta.exists():
        with store.atomic_path(meta) as tmp:
            tmp.write_text(text)
    return partial
