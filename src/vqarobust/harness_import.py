"""Answers another harness produced, as this workflow's predictions files (docs/interop.md).

The records :mod:`vqarobust.harness_logs` reads are mapped to the subsets of a job by
task name, to their questions by the id a record names or by its ``doc_id``'s row of
the exported dataset, and written as ``store.PREDICTION_SCHEMA`` tables. A record of a
task outside the subsets imported is counted and logged; so are a record of a question
its subset does not ask and a question without a record, which fail a workflow job
(:func:`import_job`).
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from vqarobust import store
from vqarobust.digests import file_sha256
from vqarobust.harness_logs import (
    Record,
    config_name,
    exported_question_ids,
    lmms_eval_files,
    log_files,
    logs_sha256,
    read_lmms_eval,
    read_records,
    task_name,
)
from vqarobust.models.replies import Responses

log = logging.getLogger(__name__)


# -- mapping records to subsets ---------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One subset an import fills: its name in the tables, the questions asked on it (in
    the order its rows are written) and, where the exported dataset is at hand, the
    question id of each ``doc_id`` (its configuration's row order)."""

    modality: str
    perturbation: str
    severity: int
    question_ids: Sequence[int]
    rows: Sequence[int] | None = None

    @property
    def task(self) -> str:
        return task_name(self.perturbation, self.severity)


@dataclass
class ImportCounts:
    """What became of the records: imported, or counted apart by reason; and the
    questions of each subset no record answered."""

    records: int = 0
    imported: int = 0
    empty: int = 0
    other_tasks: dict[str, int] = field(default_factory=dict)
    unknown_questions: dict[str, int] = field(default_factory=dict)
    missing: dict[str, int] = field(default_factory=dict)

    def problems(self) -> list[str]:
        """A sentence per kind of unmapped record or missing answer."""
        out = []
        if self.unknown_questions:
            out.append(f"records of questions not asked on their subset: {self.unknown_questions}")
        if self.missing:
            out.append(f"questions without a record: {self.missing}")
        return out

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def _task_lookup(targets: Sequence[Target]) -> dict[str, Target]:
    by_task: dict[str, Target] = {}
    for target in targets:
        if target.task in by_task:
            other = by_task[target.task]
            raise ValueError(
                f"subsets {other.perturbation}/{other.severity} and "
                f"{target.perturbation}/{target.severity} share task name {target.task}"
            )
        by_task[target.task] = target
    return by_task


def _target_of(record: Record, by_task: Mapping[str, Target]) -> Target | None:
    """The subset of a record: by its task, or (a VLMEvalKit file named for it) by the
    longest task name its file stem ends with."""
    if record.task in by_task:
        return by_task[record.task]
    if record.by_file_name:
        ends = [t for t in by_task if record.task.endswith("_" + t)]
        if ends:
            return by_task[max(ends, key=len)]
    return None


def _question_id(record: Record, target: Target) -> int | None:
    """The record's question id: the one it names and/or its ``doc_id``'s row of the
    exported dataset (both given: they must agree); None for a doc_id past the rows."""
    where = f"{record.source} (doc_id {record.doc_id})"
    from_row = None
    if target.rows is not None and record.doc_id is not None:
        if not 0 <= record.doc_id < len(target.rows):
            return None  # a row the export does not have: counted as unknown
        from_row = int(target.rows[record.doc_id])
    if record.question_id is not None:
        if from_row is not None and from_row != record.question_id:
            raise ValueError(
                f"{where}: the record names question {record.question_id}, but row "
                f"{record.doc_id} of the exported configuration is question {from_row}: "
                "the logs are of another export"
            )
        return record.question_id
    if from_row is None:
        raise ValueError(
            f"{where}: the record names no question_id; give the exported dataset "
            "(its row order maps doc_id to the question)"
        )
    return from_row


def import_answers(
    records: Sequence[Record], targets: Sequence[Target], model: str
) -> tuple[list[pa.Table], ImportCounts]:
    """One predictions table (``store.PREDICTION_SCHEMA``) per target, in its questions'
    order, and the counts. An empty or missing answer is ``empty`` (never scored), its raw
    reply kept; ``truncated`` is False (the harness's prompt is not known here)."""
    found, other, unknown = _match(records, targets)
    counts = ImportCounts(records=len(records))
    tables = []
    for target in targets:
        answers = found[target.task]
        ids = [q for q in target.question_ids if q in answers]
        if len(ids) < len(target.question_ids):
            counts.missing[target.task] = len(target.question_ids) - len(ids)
        table = _predictions(target, [answers[q] for q in ids], ids, model)
        counts.imported += table.num_rows
        counts.empty += table.column("answer").null_count
        tables.append(table)
    counts.other_tasks = dict(sorted(other.items()))
    counts.unknown_questions = dict(sorted(unknown.items()))
    _log_counts(counts)
    return tables, counts


def _match(
    records: Sequence[Record], targets: Sequence[Target]
) -> tuple[dict[str, dict[int, Record]], Counter[str], Counter[str]]:
    """Each target's records by question id; the records of other tasks and of
    questions their subset does not ask, counted by task. Two records of one question
    raise."""
    by_task = _task_lookup(targets)
    found: dict[str, dict[int, Record]] = {t.task: {} for t in targets}
    asked_ids = {t.task: frozenset(t.question_ids) for t in targets}
    other: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for record in records:
        target = _target_of(record, by_task)
        if target is None:
            other[record.task] += 1
            continue
        qid = _question_id(record, target)
        if qid is None or qid not in asked_ids[target.task]:
            unknown[target.task] += 1
            continue
        seen = found[target.task]
        if qid in seen:
            raise ValueError(
                f"{record.source}: question {qid} of {target.task} answered twice "
                f"(also in {seen[qid].source})"
            )
        seen[qid] = record
    return found, other, unknown


def _predictions(
    target: Target, records: Sequence[Record], ids: Sequence[int], model: str
) -> pa.Table:
    """The predictions of one subset from its records, statuses set as the inference
    loop sets them (:class:`vqarobust.models.replies.Responses`)."""
    responses = Responses.sized(len(ids))
    for i, record in enumerate(records):
        responses.set(i, record.answer or "", record.raw)
    n = len(ids)
    return pa.table(
        {
            "question_id": pa.array(ids, pa.int64()),
            "answer": pa.array(responses.answers, pa.string()),
            "raw_answer": pa.array(responses.raw, pa.string()),
            "model": pa.array([model] * n, pa.string()),
            "modality": pa.array([target.modality] * n, pa.string()),
            "perturbation": pa.array([target.perturbation] * n, pa.string()),
            "severity": pa.array([target.severity] * n, store.SEVERITY),
            "truncated": pa.array([False] * n, pa.bool_()),
            "status": pa.array(responses.status, pa.string()),
            "finish_reason": pa.array([None] * n, pa.string()),
        },
        schema=store.PREDICTION_SCHEMA,
    )


def _log_counts(counts: ImportCounts) -> None:
    log.info(
        "imported %d of %d records (%d empty answers)",
        counts.imported,
        counts.records,
        counts.empty,
    )
    if counts.other_tasks:
        log.info("records of tasks outside the imported subsets: %s", counts.other_tasks)
    for problem in counts.problems():
        log.warning(problem)


# -- a workflow job -----------------------------------------------------------------------


def import_job(
    model: str,
    spec: Mapping[str, Any],
    questions_path: str | os.PathLike[str],
    outputs: Sequence[tuple[Sequence[Any], str | os.PathLike[str]]],
) -> list[int]:
    """The run_model job of a model of family ``imported``: read its logs (``spec``'s
    ``logs`` in ``format``; ``exported``, the exported dataset, maps ``doc_id``s), fill
    each output's subsets (:class:`vqarobust.inference.Subset`) and write its file with
    a record of what was read. A record of a question not asked, or a question without a
    record, fails the job (counted in the message); records of other tasks are counted
    in the record, and lmms-eval logs of tasks no subset of the job has are logged and
    not read. Returns each output's number of predictions."""
    started = time.time()
    fmt = spec.get("format", "lmms-eval")
    files = log_files(spec["logs"], fmt)
    questions = store.read_questions(questions_path).sort_by(
        [("image_id", "ascending"), ("question_id", "ascending")]
    )
    jobs = [(_targets(questions, subsets, spec.get("exported")), path) for subsets, path in outputs]
    # lmms-eval keeps a task per file: each output reads its own tasks' files only.
    # VLMEvalKit's files need not say their subsets in their names: read once.
    every = None if fmt == "lmms-eval" else read_records(spec["logs"], fmt)
    unread: list[str] = []
    if every is None:
        wanted = {t.task for targets, _ in jobs for t in targets}
        unread = sorted(set(lmms_eval_files(spec["logs"])) - wanted)
        if unread:
            log.warning("logs of tasks no subset of this job has, not read: %s", unread)
    head = {"format": fmt, "files": [str(f) for f in files], "unread_tasks": unread}
    digest = logs_sha256(files)
    written = []
    for targets, path in jobs:
        tasks = {t.task for t in targets}
        records = every if every is not None else read_lmms_eval(spec["logs"], tasks)
        tables, counts = import_answers(records, targets, model)
        problems = counts.problems()
        if problems:
            raise ValueError(f"model {model!r}: importing {spec['logs']}: " + "; ".join(problems))
        record = _record(model, spec, digest, questions_path, targets, started)
        record["import"] = {**head, **counts.as_dict()}
        table = pa.concat_tables(tables).replace_schema_metadata(
            {store.INPUTS_KEY: json.dumps(record, sort_keys=True, default=str).encode("utf-8")}
        )
        store.write_table(table, path)
        written.append(table.num_rows)
    return written


def _targets(questions: pa.Table, subsets: Sequence[Any], exported: str | None) -> list[Target]:
    """The :class:`Target` of each of an output's subsets: the questions the workflow
    asks on it (:func:`vqarobust.inference.subset_questions`) and, with the exported
    dataset, its configuration's row order."""
    from vqarobust.inference import subset_questions

    targets = []
    for subset in subsets:
        ids = subset_questions(questions, subset).column("question_id").to_pylist()
        rows = None
        if exported is not None:
            rows = exported_question_ids(
                exported, config_name(subset.perturbation, subset.severity)
            )
        targets.append(Target(subset.modality, subset.perturbation, subset.severity, ids, rows))
    return targets


def _record(
    model: str,
    spec: Mapping[str, Any],
    digest: str,
    questions_path: str | os.PathLike[str],
    targets: Sequence[Target],
    started: float,
) -> dict[str, Any]:
    """An output's metadata record, in the shape the inference loop writes (provenance,
    model cards and costs read it): the logs stand for the checkpoint, and nothing was
    loaded or metered."""
    from vqarobust.environment import machine
    from vqarobust.models import family_code_digest

    return {
        "inputs": {
            "model": model,
            "spec": dict(spec),
            "checkpoint": {"logs": {"path": str(spec["logs"]), "sha256": digest}},
            "code": family_code_digest("imported"),
            "questions": file_sha256(questions_path),
            "subsets": [t.task for t in targets],
        },
        "started": started,
        "finished": time.time(),
        "parameters": None,
        "machine": machine(),
        "costs": None,  # the harness's token counts are not imported
        "load_s": None,
        "served_as": [],
    }
