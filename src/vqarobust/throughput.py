"""Measured questions per second of models on one GPU: the table
``benchmarks/gpu_throughput.py`` writes (``--json``), read by ``vqarobust gpu-hours`` and by
the plan's ``runtime`` requests (``resources.throughput``).

A table is a JSON object: the machine it was measured on (``gpu``, ``torch``,
``transformers``), the command that measured it (``source``), the questions per image of
the measured images (``questions_per_image``) and ``rows``, one per model x batch size x
image-feature reuse: ``model`` (the benchmark's name), ``repository`` (the model
repository entry it stands for, or null), ``batch``, ``share_image_features`` (true,
false or null where the family has no such switch), ``questions_per_s`` and ``peak_gib``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Every key a table and each of its rows must have, in the order written.
TABLE_KEYS = ("gpu", "torch", "transformers", "source", "questions_per_image", "rows")
ROW_KEYS = ("model", "repository", "batch", "share_image_features", "questions_per_s", "peak_gib")
# The fewest minutes a job's runtime request derived from a table asks for: loading the
# weights and the job's start are not in the table.
RUNTIME_FLOOR = 10
# The keys of a model entry that name its weights: two entries with the same values load
# the same checkpoints, so a table row of one prices the other.
CHECKPOINT_KEYS = ("path_or_id", "itm_model", "caption_model", "qa_model")


@dataclass(frozen=True)
class Row:
    """One measured setting of one model."""

    model: str
    repository: str | None
    batch: int
    share_image_features: bool | None
    questions_per_s: float
    peak_gib: float | None

    def setting(self) -> str:
        """The measured setting in words, e.g. ``batch 32, image-feature reuse off``."""
        if self.share_image_features is None:
            return f"batch {self.batch}"
        reuse = "on" if self.share_image_features else "off"
        return f"batch {self.batch}, image-feature reuse {reuse}"


@dataclass(frozen=True)
class Table:
    """A throughput table (see the module's docstring) and where it was read from."""

    gpu: str
    torch: str
    transformers: str
    source: str
    questions_per_image: float | None
    rows: tuple[Row, ...]
    path: str = ""

    @property
    def models(self) -> list[str]:
        """The measured models, in the table's order."""
        return list(dict.fromkeys(r.model for r in self.rows))

    def to_json(self) -> str:
        """The table as ``benchmarks/gpu_throughput.py --json`` writes it."""
        body = {k: getattr(self, k) for k in TABLE_KEYS if k != "rows"}
        body["rows"] = [{k: getattr(r, k) for k in ROW_KEYS} for r in self.rows]
        return json.dumps(body, indent=1) + "\n"


class ThroughputError(ValueError):
    """A throughput table that cannot be read; the message names the file and key."""


def _row(i: int, raw: Any, where: str) -> Row:
    if not isinstance(raw, Mapping):
        raise ThroughputError(f"{where}: rows[{i}] is not an object")
    missing = [k for k in ROW_KEYS if k not in raw]
    if missing:
        raise ThroughputError(f"{where}: rows[{i}] has no {', '.join(missing)}")
    rate = raw["questions_per_s"]
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
        raise ThroughputError(
            f"{where}: rows[{i}].questions_per_s must be a positive number, got {rate!r}"
        )
    batch = raw["batch"]
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ThroughputError(f"{where}: rows[{i}].batch must be a positive integer, got {batch!r}")
    if not any(raw["share_image_features"] is v for v in (True, False, None)):
        raise ThroughputError(
            f"{where}: rows[{i}].share_image_features must be true, false or null"
        )
    return Row(
        model=str(raw["model"]),
        repository=raw["repository"],
        batch=batch,
        share_image_features=raw["share_image_features"],
        questions_per_s=float(rate),
        peak_gib=raw["peak_gib"],
    )


def parse_table(body: Any, where: str) -> Table:
    """A table from its parsed JSON; :class:`ThroughputError` names what is missing."""
    if not isinstance(body, Mapping):
        raise ThroughputError(f"{where}: not a JSON object")
    missing = [k for k in TABLE_KEYS if k not in body]
    if missing:
        raise ThroughputError(f"{where}: no {', '.join(missing)} (keys: {', '.join(TABLE_KEYS)})")
    if not isinstance(body["rows"], list) or not body["rows"]:
        raise ThroughputError(f"{where}: rows is empty")
    rows = tuple(_row(i, r, where) for i, r in enumerate(body["rows"]))
    per_image = body["questions_per_image"]
    return Table(
        gpu=str(body["gpu"]),
        torch=str(body["torch"]),
        transformers=str(body["transformers"]),
        source=str(body["source"]),
        questions_per_image=None if per_image is None else float(per_image),
        rows=rows,
        path=where,
    )


def read_table(path: str | Path) -> Table:
    """The throughput table of the JSON file ``path``."""
    path = Path(path)
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ThroughputError(f"{path}: no such file") from None
    except json.JSONDecodeError as exc:
        raise ThroughputError(f"{path}: not JSON ({exc})") from None
    return parse_table(body, str(path))


def rows_from_markdown(text: str, repositories: Mapping[str, str]) -> list[dict[str, Any]]:
    """The rows of the Markdown table ``benchmarks/gpu_throughput.py`` prints, read by
    their column names (``model``, ``batch``, ``image-feature reuse``, ``questions/s``,
    ``peak GPU GiB``; other columns are ignored), with each model's repository entry from
    ``repositories`` (null where it has none)."""
    lines = [line.strip() for line in text.splitlines() if line.strip().startswith("|")]
    if len(lines) < 3:
        raise ThroughputError("no Markdown table")
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    wanted = {
        "model": "model",
        "batch": "batch",
        "image-feature reuse": "share_image_features",
        "questions/s": "questions_per_s",
        "peak GPU GiB": "peak_gib",
    }
    missing = [c for c in wanted if c not in head]
    if missing:
        raise ThroughputError(f"the Markdown table has no column {', '.join(missing)}")
    rows = []
    for line in lines[2:]:
        cells = dict(zip(head, (c.strip() for c in line.strip("|").split("|")), strict=True))
        reuse = {"yes": True, "no": False, "-": None}[cells["image-feature reuse"]]
        rows.append(
            {
                "model": cells["model"],
                "repository": repositories.get(cells["model"]),
                "batch": int(cells["batch"]),
                "share_image_features": reuse,
                "questions_per_s": float(cells["questions/s"]),
                "peak_gib": float(cells["peak GPU GiB"]),
            }
        )
    return rows


def checkpoints(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    """The weights an entry loads (its :data:`CHECKPOINT_KEYS`), or () for none."""
    ids = tuple(entry.get(k) for k in CHECKPOINT_KEYS)
    return ids if any(ids) else ()


def match_model(
    name: str, entry: Mapping[str, Any], table: Table, repository: Mapping[str, Any]
) -> str | None:
    """The table's model that measured the config's model ``name``: the same name, else
    the row whose repository entry loads the same checkpoints as ``entry``; None if none."""
    if name in table.models:
        return name
    mine = checkpoints(entry)
    for row in table.rows:
        if row.repository == name:
            return row.model
        theirs = repository.get(row.repository or "")
        if mine and theirs is not None and checkpoints(theirs) == mine:
            return row.model
    return None


def pick_row(table: Table, model: str, entry: Mapping[str, Any], fastest: bool = False) -> Row:
    """The measured setting of ``model`` that stands for ``entry``: its fastest row with
    ``fastest``, else the largest measured batch not above the entry's ``batch_size`` (the
    smallest measured batch when all are above it) with the entry's image-feature reuse
    (default on) where measured."""
    rows = [r for r in table.rows if r.model == model]
    if fastest:
        return max(rows, key=lambda r: r.questions_per_s)
    size = entry.get("batch_size") or 1
    below = [r.batch for r in rows if r.batch <= size]
    batch = max(below) if below else min(r.batch for r in rows)
    at = [r for r in rows if r.batch == batch]
    reuse = bool(entry.get("share_image_features", True))
    same = [r for r in at if r.share_image_features in (reuse, None)]
    return (same or at)[0]


def runtime_minutes(seconds: float, margin: float, floor: int) -> int:
    """The minutes a job estimated at ``seconds`` asks for: ``margin`` times the
    estimate, rounded up, at least ``floor``."""
    return max(floor, math.ceil(margin * seconds / 60))


def table_from_rows(
    rows: Sequence[Mapping[str, Any]], machine: Mapping[str, Any], source: str
) -> Table:
    """A table of ``rows`` measured on ``machine`` (gpu, torch, transformers,
    questions_per_image) by the command ``source``; checked as a read table is."""
    body = {**{k: machine.get(k) for k in TABLE_KEYS[:3]}, "source": source}
    body["questions_per_image"] = machine.get("questions_per_image")
    body["rows"] = list(rows)
    return parse_table(body, "the measured table")
