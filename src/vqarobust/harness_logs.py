"""The logs of other harnesses, read as records of (task, document or question, answer)
(docs/interop.md); :mod:`vqarobust.harness_import` maps them to subsets and writes
predictions.

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
``<perturbation>-<severity>`` (:func:`config_name`), and a configuration's row order
(:func:`exported_question_ids`) is what lmms-eval's ``doc_id`` indexes.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import yaml

from vqarobust.digests import file_sha256, text_sha256

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
