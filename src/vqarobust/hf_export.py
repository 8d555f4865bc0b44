"""Every subset of a finished run as one Hugging Face dataset repository on disk
(docs/interop.md, "Export").

One configuration per perturbation x severity, named ``<perturbation>-<severity>``
(``clean-0`` for the clean subset), each one split (``test``) of Parquet files whose
``image`` column is a ``datasets.Image`` holding the image's bytes exactly as the run
stored them (no decoding, no re-encoding). A row is one question as the models were
asked it: the perturbed question of a text or basic-question set, the swapped image of
a context swap. The card (``README.md``, :mod:`vqarobust.hf_card`) lists the
configurations and their features in its YAML front matter; ``lmms_eval_tasks/``
(:mod:`vqarobust.lmms_tasks`) holds one lmms-eval task per configuration.

The subsets are the study plan's (:class:`vqarobust.plan.StudyPlan`), found where its
jobs write them: :func:`vqarobust.plan.export.plan_entries` describes them as plain data
(a Snakemake param), :func:`export_dataset` reads the files and writes the folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vqarobust import store
from vqarobust.inference import Subset, context_severities, subset_questions

SPLIT = "test"
TASKS_FOLDER = "lmms_eval_tasks"
COLUMNS = (
    "question_id",
    "image_id",
    "image",
    "question",
    "answers",
    "question_type",
    "answer_type",
    "perturbation",
    "modality",
    "severity",
)
# The Hugging Face features, as ``datasets.Features.to_dict`` spells them; "Sequence"
# rather than 4.x's "List" so that datasets 3.x reads the files too.
FEATURES: dict[str, dict[str, Any]] = {
    "question_id": {"dtype": "int64", "_type": "Value"},
    "image_id": {"dtype": "int64", "_type": "Value"},
    "image": {"_type": "Image"},
    "question": {"dtype": "string", "_type": "Value"},
    "answers": {"feature": {"dtype": "string", "_type": "Value"}, "_type": "Sequence"},
    "question_type": {"dtype": "string", "_type": "Value"},
    "answer_type": {"dtype": "string", "_type": "Value"},
    "perturbation": {"dtype": "string", "_type": "Value"},
    "modality": {"dtype": "string", "_type": "Value"},
    "severity": {"dtype": "int16", "_type": "Value"},
}
SCHEMA = pa.schema(
    [
        ("question_id", pa.int64()),
        ("image_id", pa.int64()),
        ("image", pa.struct([("bytes", pa.binary()), ("path", pa.string())])),
        ("question", pa.string()),
        ("answers", pa.list_(pa.string())),
        ("question_type", pa.string()),
        ("answer_type", pa.string()),
        ("perturbation", pa.string()),
        ("modality", pa.string()),
        ("severity", pa.int16()),
    ],
    # datasets reads its features from this key: the image column decodes as an image.
    metadata={"huggingface": json.dumps({"info": {"features": FEATURES}})},
)
# Small row groups: the Hub's viewer and streaming readers fetch one group at a time.
ROWS_PER_GROUP = 100
# A configuration's file closes once it holds this many bytes of images.
SHARD_BYTES = 500 * 2**20
# Questions read (and their images decoded from the shards) at a time.
CHUNK = 512
EXTENSIONS = {"png": "png", "jpeg": "jpg"}


def config_name(perturbation: str, severity: int) -> str:
    """The configuration of one subset: ``snow-3``, ``clean-0``."""
    return f"{perturbation}-{int(severity)}"


@dataclass(frozen=True)
class ExportSubset:
    """One configuration: a subset at one severity, its image folder and its question
    set (None: the dataset's questions), paths relative to the run's working folder."""

    perturbation: str
    severity: int
    modality: str
    images: str
    questions: str | None = None

    @property
    def config(self) -> str:
        return config_name(self.perturbation, self.severity)

    def inference_subset(self, root: Path) -> Subset:
        """The subset as inference reads it (what the models were asked)."""
        questions = None if self.questions is None else str(root / self.questions)
        return Subset(
            self.perturbation, self.severity, str(root / self.images), self.modality, questions
        )


def expand(entries: Sequence[Mapping[str, Any]], root: Path) -> list[ExportSubset]:
    """One :class:`ExportSubset` per configuration of ``entries``
    (:func:`vqarobust.plan.export.plan_entries`), a context subset's from the swap indices
    its question set holds."""
    out = []
    for e in entries:
        modality = "clean" if e["kind"] == "clean" else e["modality"]
        if e["kind"] == "context":
            for s in context_severities(root / e["question_set"]):
                out.append(ExportSubset(e["name"], s, modality, e["images"], e["question_set"]))
            continue
        for severity, images, questions in e["levels"]:
            out.append(ExportSubset(e["name"], int(severity), modality, images, questions))
    return out


def subset_table(questions: pa.Table, subset: ExportSubset, root: Path) -> pa.Table:
    """The rows of one configuration, without images: the questions as asked on it (a
    question the fidelity filter dropped is not asked), in (image, question) order."""
    asked = subset_questions(questions, subset.inference_subset(root))
    asked = asked.sort_by([("image_id", "ascending"), ("question_id", "ascending")])
    n = asked.num_rows
    columns = {
        name: asked.column(name).cast(SCHEMA.field(name).type)
        for name in (
            "question_id",
            "image_id",
            "question",
            "answers",
            "question_type",
            "answer_type",
        )
    }
    columns |= {
        "perturbation": pa.array([subset.perturbation] * n, pa.string()),
        "modality": pa.array([subset.modality] * n, pa.string()),
        "severity": pa.array([subset.severity] * n, pa.int16()),
    }
    return pa.table(columns)


def _with_images(rows: pa.Table, shards: store.ImageShards) -> pa.Table:
    """``rows`` with their ``image`` column: each image's stored bytes and a file name
    saying its format."""
    ids = rows.column("image_id").to_pylist()
    data = shards.read(set(ids))
    names = {}
    for image_id, blob in data.items():
        fmt = store.image_format_of(blob)
        if fmt not in EXTENSIONS:
            raise ValueError(f"{shards.directory}: image {image_id} is {fmt!r}, not PNG or JPEG")
        names[image_id] = f"{image_id}.{EXTENSIONS[fmt]}"
    image = pa.StructArray.from_arrays(
        [pa.array([data[i] for i in ids], pa.binary()), pa.array([names[i] for i in ids])],
        fields=list(SCHEMA.field("image").type),
    )
    columns = {name: rows.column(name) for name in rows.column_names} | {"image": image}
    return pa.table({name: columns[name] for name in COLUMNS}, schema=SCHEMA)


def _chunks(table: pa.Table, size: int) -> Iterator[pa.Table]:
    for start in range(0, table.num_rows, size):
        yield table.slice(start, size)


def write_config(
    rows: pa.Table, images: str | os.PathLike[str], folder: Path
) -> tuple[list[Path], int]:
    """Write one configuration's rows with their images as ``folder/test-NNNNN-of-MMMMM.
    parquet`` (a new file each ``SHARD_BYTES`` of images); returns the files and the
    rows' size in Arrow (the card's ``num_bytes``)."""
    folder.mkdir(parents=True, exist_ok=True)
    shards = store.ImageShards(images)
    parts: list[Path] = []
    writer: pq.ParquetWriter | None = None
    held = total = 0
    for chunk in _chunks(rows, CHUNK):
        table = _with_images(chunk, shards)
        if writer is None or held >= SHARD_BYTES:
            if writer is not None:
                writer.close()
            parts.append(folder / f"{SPLIT}-{len(parts):05d}.parquet")
            writer, held = pq.ParquetWriter(parts[-1], SCHEMA), 0
        writer.write_table(table, row_group_size=ROWS_PER_GROUP)
        held += table.column("image").nbytes
        total += table.nbytes
    if writer is None:  # an empty subset still gets its (empty) file
        parts.append(folder / f"{SPLIT}-00000.parquet")
        pq.write_table(SCHEMA.empty_table(), parts[-1])
    else:
        writer.close()
    named = []
    for i, part in enumerate(parts):
        final = folder / f"{SPLIT}-{i:05d}-of-{len(parts):05d}.parquet"
        part.rename(final)
        named.append(final)
    return named, total


@dataclass(frozen=True)
class Exported:
    """What :func:`export_dataset` wrote: rows and Arrow bytes per configuration (in
    order), each configuration's subset, and what was left out with why."""

    rows: dict[str, int]
    nbytes: dict[str, int]
    subsets: dict[str, ExportSubset]
    left_out: dict[str, str]


def export_dataset(
    entries: Mapping[str, Any],
    facts: Mapping[str, Any],
    root: str | os.PathLike[str],
    out: str | os.PathLike[str],
    dataset_path: str | None = None,
) -> Exported:
    """Write the dataset repository ``out`` (all or nothing; an existing ``out`` must be
    an empty folder) from the run in the working folder ``root``: a configuration per
    subset and severity of ``entries`` (:func:`vqarobust.plan.export.plan_entries`), the
    card from ``facts`` (:func:`vqarobust.plan.export.card_facts`), and the lmms-eval
    tasks, whose
    ``dataset_path`` is ``dataset_path`` (a Hub id) or ``out``'s absolute path."""
    from vqarobust import hf_card, lmms_tasks

    root, target = Path(root), Path(out)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        # The folder is swapped in whole: never over files someone else put there.
        raise FileExistsError(f"{target} exists and is not an empty folder")
    subsets = expand(entries["subsets"], root)
    if not subsets:
        raise ValueError(f"nothing to export: {entries['left_out']}")
    questions_path = root / facts["questions"]
    questions = store.read_questions(questions_path)
    info = json.loads((root / facts["dataset_info"]).read_text(encoding="utf-8"))
    rows: dict[str, int] = {}
    nbytes: dict[str, int] = {}
    with store.atomic_path(target) as tmp:
        tmp.mkdir(parents=True)
        for subset in subsets:
            table = subset_table(questions, subset, root)
            _, size = write_config(table, root / subset.images, tmp / "data" / subset.config)
            rows[subset.config], nbytes[subset.config] = table.num_rows, size
        done = Exported(rows, nbytes, {s.config: s for s in subsets}, dict(entries["left_out"]))
        card = hf_card.dataset_card(done, facts, info)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        where = dataset_path or str(target.resolve())
        configs = [(s.config, s.perturbation, s.severity, s.modality) for s in subsets]
        lmms_tasks.write_tasks(tmp / TASKS_FOLDER, configs, where)
    return done
