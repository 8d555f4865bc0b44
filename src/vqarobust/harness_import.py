"""Answers another harness produced, as this workflow's predictions files (docs/interop.md).

Two formats are read:

* ``lmms-eval``: the per-sample logs ``--log_samples`` writes, one
  ``<date>_samples_<task>.jsonl`` per task (``<date>`` is ``YYYYMMDD_HHMMSS``) under
  ``<output_path>/<model>/``. A line holds ``doc_id`` (the row's position in the task's
  split), ``target``, ``input`` (the prompt), ``filtered_resps`` (what the task scored:
  one string for a ``generate_until`` task), ``resps`` when the raw reply differs, the
  task's metrics and whatever else ``process_results`` returned. lmms-eval 0.4 and later
  drop the document itself (``doc``) from the file; where a record still names its
  ``question_id`` (in ``doc``, at the top level, or in a returned dict such as VQAv2's
  ``submission``) it is read, and with the exported dataset at hand ``doc_id`` maps to the
  question id exactly (both, when given, must agree).
* ``vlmevalkit``: VLMEvalKit's prediction files ``<model>_<dataset>.tsv`` (or ``.xlsx``):
  the dataset's columns less ``image``, plus ``prediction``. Required: ``prediction``;
  ``question_id``, or ``index`` holding the question id; and ``perturbation`` with
  ``severity`` columns, or a file name ending in the subset's task name
  (``..._vqarobust_snow_3.tsv``).

Tasks name subsets as the exported dataset's lmms-eval tasks do, ``vqarobust_<perturbation>_
<severity>`` (:func:`task_name`); the dataset's configurations are
``<perturbation>-<severity>`` (:func:`config_name`). A record of a task outside the
subsets imported is counted and logged; so are a record of a question its subset does
not ask and a question without a record, which fail a workflow job (:func:`import_job`).
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from vqarobust import store
from vqarobust.digests import file_sha256, text_sha256
from vqarobust.models.replies import Responses

log = logging.getLogger(__name__)

FORMATS = ("lmms-eval", "vlmevalkit")
TASK_PREFIX = "vqarobust"
# lmms-eval's sample log name: the run's date (%Y%m%d_%H%M%S), then the task.
_SAMPLES = re.compile(r"^(?P<date>\d{8}_\d{6})_samples_(?P<task>.+)\.jsonl$")
_VLMEVALKIT_SUFFIXES = (".tsv", ".xlsx")


def config_name(perturbation: str, severity: int) -> str:
    """The exported dataset's configuration of a subset (``clean-0``, ``snow-3``)."""
    return f"{perturbation}-{severity}"


def task_name(perturbation: str, severity: int) -> str:
    """The lmms-eval task of a subset: ``vqarobust_<perturbation>_<severity>``, non-word
    characters of the perturbation made ``_``."""
    word = re.sub(r"\W", "_", perturbation)
    return f"{TASK_PREFIX}_{word}_{severity}"


@dataclass(frozen=True)
class Record:
    """One answer as a harness logged it: its task (or VLMEvalKit file stem), the row's
    position in the task's split (``doc_id``) and/or its question id, the answer the
    harness scored and the raw reply before its filters."""

    task: str
    source: str
    answer: str | None
    raw: str | None
    doc_id: int | None = None
    question_id: int | None = None
    # A VLMEvalKit file without perturbation columns names its subset by its file name.
    by_file_name: bool = False


# -- lmms-eval ------------------------------------------------------------------------


def lmms_eval_files(folder: str | os.PathLike[str]) -> dict[str, Path]:
    """Each task's sample log under ``folder``: the newest run's where a task was run
    more than once (older ones are logged as superseded)."""
    root = Path(folder)
    if not root.is_dir():
        raise FileNotFoundError(f"lmms-eval logs: no folder at {root}")
    by_task: dict[str, list[tuple[str, Path]]] = {}
    for path in sorted(root.rglob("*_samples_*.jsonl")):
        match = _SAMPLES.match(path.name)
        if match:
            by_task.setdefault(match["task"], []).append((match["date"], path))
    if not by_task:
        raise FileNotFoundError(
            f"lmms-eval logs: no <date>_samples_<task>.jsonl under {root} "
            "(run lmms-eval with --log_samples --output_path)"
        )
    # lmms-eval writes one folder per model under --output_path: two are two models.
    folders = sorted({str(path.parent) for runs in by_task.values() for _, path in runs})
    if len(folders) > 1:
        raise ValueError(f"lmms-eval logs of several models under {root}: {folders}; name one")
    out = {}
    for task, runs in sorted(by_task.items()):
        runs.sort()
        out[task] = runs[-1][1]
        for _, older in runs[:-1]:
            log.warning("%s: superseded by the newer %s of task %s", older, runs[-1][1], task)
    return out


def _single(value: Any, what: str, where: str) -> str | None:
    """A logged response as one string: lmms-eval flattens one request's list, but older
    logs keep ``[[text]]``; several responses per document (``repeats``) are refused."""
    while isinstance(value, list):
        if len(value) > 1:
            raise ValueError(
                f"{where}: {what} holds {len(value)} responses for one document "
                "(a task with repeats); import one response per question"
            )
        value = value[0] if value else None
    if value is not None and not isinstance(value, str):
        raise ValueError(f"{where}: {what} is {type(value).__name__}, not text")
    return value


def _as_id(value: Any, what: str, where: str) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {what} {value!r} is not an integer") from None


def logged_question_id(sample: Mapping[str, Any], where: str = "sample") -> int | None:
    """The question id a sample names, if any: its ``doc``'s, its own, or that of a dict
    the task's ``process_results`` returned (VQAv2's ``submission``)."""
    doc = sample.get("doc")
    if isinstance(doc, Mapping) and "question_id" in doc:
        return _as_id(doc["question_id"], "doc.question_id", where)
    if "question_id" in sample:
        return _as_id(sample["question_id"], "question_id", where)
    for key, value in sample.items():
        if isinstance(value, Mapping) and "question_id" in value:
            return _as_id(value["question_id"], f"{key}.question_id", where)
    return None


def read_lmms_eval(
    folder: str | os.PathLike[str], tasks: Collection[str] | None = None
) -> list[Record]:
    """Every record of the sample logs under ``folder`` (:func:`lmms_eval_files`), or of
    those of ``tasks`` only (a file holds one task: the others are not read)."""
    records = []
    for task, path in lmms_eval_files(folder).items():
        if tasks is not None and task not in tasks:
            continue
        with path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                where = f"{path}:{n}"
                sample = json.loads(line)
                answer = _single(sample.get("filtered_resps"), "filtered_resps", where)
                raw = _single(sample["resps"], "resps", where) if "resps" in sample else answer
                records.append(
                    Record(
                        task=task,
                        source=str(path),
                        answer=answer,
                        raw=raw,
                        doc_id=_as_id(sample.get("doc_id"), "doc_id", where),
                        question_id=logged_question_id(sample, where),
                    )
                )
    return records


def lmms_eval_results(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """lmms-eval's own aggregates from the newest ``<date>_results.json`` under
    ``folder``: per task, its ``results`` entry (``"exact_match,none"`` is the mean of
    the samples' ``exact_match`` under filter ``none``, with ``..._stderr,none``), to
    compare with the workflow's accuracy of the imported answers (docs/interop.md)."""
    found = sorted(Path(folder).rglob("*_results.json"), key=lambda p: p.name)
    if not found:
        raise FileNotFoundError(f"lmms-eval logs: no <date>_results.json under {folder}")
    return dict(json.loads(found[-1].read_text(encoding="utf-8"))["results"])


# -- VLMEvalKit -----------------------------------------------------------------------


def vlmevalkit_files(path: str | os.PathLike[str]) -> list[Path]:
    """The prediction file ``path``, or every ``.tsv``/``.xlsx`` file under a folder."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise FileNotFoundError(f"VLMEvalKit predictions: no file or folder at {root}")
    files = sorted(p for p in root.rglob("*") if p.suffix in _VLMEVALKIT_SUFFIXES)
    if not files:
        raise FileNotFoundError(f"VLMEvalKit predictions: no .tsv or .xlsx file under {root}")
    return files


def _read_sheet(path: Path) -> list[dict[str, str]]:
    """A prediction file's rows, every cell as text ("" for an empty one)."""
    import polars as pl

    if path.suffix == ".xlsx":
        try:
            frame = pl.read_excel(path, infer_schema_length=0)
        except ModuleNotFoundError as exc:
            raise ModuleNotFoundError(
                f"{path}: reading .xlsx needs fastexcel or openpyxl ({exc.name} is missing); "
                "install one, or run VLMEvalKit with PRED_FORMAT=tsv"
            ) from None
    else:
        # VLMEvalKit writes every cell quoted; an empty cell is read as "" below.
        frame = pl.read_csv(path, separator="\t", infer_schema=False)
    return frame.cast(pl.String).fill_null("").to_dicts()


def read_vlmevalkit(path: str | os.PathLike[str]) -> list[Record]:
    """Every row of the prediction files at ``path`` (see the module docstring for the
    columns required)."""
    records = []
    for file in vlmevalkit_files(path):
        rows = _read_sheet(file)
        columns = set(rows[0]) if rows else set()
        id_column = "question_id" if "question_id" in columns else "index"
        missing = {"prediction", id_column} - columns
        if missing:
            raise ValueError(
                f"{file}: VLMEvalKit predictions need columns prediction and question_id "
                f"(or index); missing {sorted(missing)}"
            )
        per_row = {"perturbation", "severity"} <= columns
        for n, row in enumerate(rows, 2):  # line 1 is the header
            where = f"{file}:{n}"
            if per_row:
                severity = _as_id(row["severity"], "severity", where)
                task = task_name(row["perturbation"], severity)  # type: ignore[arg-type]
            else:
                task = file.stem
            answer = row["prediction"]
            records.append(
                Record(
                    task=task,
                    source=str(file),
                    answer=answer,
                    raw=answer,
                    question_id=_as_id(row[id_column], id_column, where),
                    by_file_name=not per_row,
                )
            )
    return records


def log_files(path: str | os.PathLike[str], fmt: str) -> list[Path]:
    """The files an import of ``path`` in format ``fmt`` reads (a workflow job's inputs)."""
    if fmt == "lmms-eval":
        return sorted(lmms_eval_files(path).values())
    if fmt == "vlmevalkit":
        return vlmevalkit_files(path)
    raise ValueError(f"harness log format must be one of {FORMATS}, not {fmt!r}")


def read_records(path: str | os.PathLike[str], fmt: str) -> list[Record]:
    """Every record of the logs at ``path`` in format ``fmt``."""
    if fmt == "lmms-eval":
        return read_lmms_eval(path)
    if fmt == "vlmevalkit":
        return read_vlmevalkit(path)
    raise ValueError(f"harness log format must be one of {FORMATS}, not {fmt!r}")


def logs_sha256(files: Sequence[str | os.PathLike[str]]) -> str:
    """SHA-256 of the files' names and bytes: which answers an import read."""
    lines = sorted(f"{Path(f).name}\0{file_sha256(f)}" for f in files)
    return text_sha256("\n".join(lines))


# -- the exported dataset's row order ---------------------------------------------------


def _card_configs(folder: Path) -> list[dict[str, Any]]:
    """The ``configs`` of the dataset card's YAML front matter (none without a card)."""
    card = folder / "README.md"
    if not card.is_file():
        return []
    text = card.read_text(encoding="utf-8")
    if not text.startswith("---"):
        return []
    front = text.split("---", 2)[1]
    return list((yaml.safe_load(front) or {}).get("configs") or [])


def _split_patterns(data_files: Any) -> dict[str, list[str]]:
    """A card's ``data_files`` as split -> path patterns (a bare pattern or list of them is
    the ``train`` split, as the Hub reads it)."""

    def patterns(value: Any) -> list[str]:
        return [value] if isinstance(value, str) else list(value)

    if isinstance(data_files, str) or (
        isinstance(data_files, list) and all(isinstance(d, str) for d in data_files)
    ):
        return {"train": patterns(data_files)}
    if isinstance(data_files, Mapping):
        return {k: patterns(v) for k, v in data_files.items()}
    return {d["split"]: patterns(d["path"]) for d in data_files or []}


def exported_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The exported dataset's card and data files (what its row order depends on)."""
    root = Path(folder)
    card = root / "README.md"
    if not card.is_file():
        raise FileNotFoundError(f"exported dataset: no dataset card (README.md) in {root}")
    return [card, *sorted(root.rglob("*.parquet"))]


def exported_question_ids(
    folder: str | os.PathLike[str], config: str, split: str | None = None
) -> list[int]:
    """The question ids of configuration ``config`` of the exported dataset at ``folder``,
    in row order: lmms-eval's ``doc_id`` indexes this list. The configuration's data files
    are those its card names (patterns resolved and sorted, as ``datasets`` reads them);
    ``split`` is needed only where the configuration has several."""
    root = Path(folder)
    entry = next((c for c in _card_configs(root) if c.get("config_name") == config), None)
    if entry is None:
        raise KeyError(f"{root}: the dataset card names no configuration {config!r}")
    splits = _split_patterns(entry.get("data_files"))
    if split is None:
        if len(splits) != 1:
            raise ValueError(f"{root}: configuration {config!r} has splits {sorted(splits)}")
        split = next(iter(splits))
    if split not in splits:
        raise KeyError(f"{root}: configuration {config!r} has no split {split!r}")
    paths = sorted({p for pattern in splits[split] for p in root.glob(pattern)})
    if not paths:
        raise FileNotFoundError(f"{root}: no data file of configuration {config!r}")
    ids: list[int] = []
    for path in paths:
        ids += pq.read_table(path, columns=["question_id"]).column("question_id").to_pylist()
    return ids


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
