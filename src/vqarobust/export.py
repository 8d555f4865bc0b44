"""Per-sample records of a results database, for comparisons with other harnesses
(docs/metrics.md, "Per-sample export").

One record per (model, subset, question): the subset (modality, perturbation, severity),
the question and the text the model was asked (the perturbed question of a text or
basic-question set, else the question itself), the human answers, a generative model's
raw reply (null for a classifier), the prediction cut from it, its normalized form (the
official VQA normalization), its score, whether the model cut the question, and the
run's ``git_commit`` and ``config_sha256``, so a record names what it was computed from.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import duckdb
import polars as pl

from vqarobust import store
from vqarobust.metrics.vqa_accuracy import normalize_column
from vqarobust.spreadsheets import write_csv

FORMATS = ("parquet", "jsonl", "csv")
PROVENANCE_KEYS = ("git_commit", "config_sha256")


def sample_records(
    db_path: str | os.PathLike[str],
    models: Sequence[str] = (),
    perturbations: Sequence[str] = (),
) -> pl.DataFrame:
    """The per-sample records of ``db_path``, optionally only of some models and
    perturbations (``clean`` selects the clean subset); unknown names are an error."""
    with duckdb.connect(str(db_path), read_only=True) as con:
        known_models = {
            m for (m,) in con.execute("SELECT DISTINCT model FROM predictions").fetchall()
        }
        known_p = {
            p for (p,) in con.execute("SELECT DISTINCT perturbation FROM predictions").fetchall()
        }
        for kind, asked, known in (
            ("model", models, known_models),
            ("perturbation", perturbations, known_p),
        ):
            unknown = sorted(set(asked) - known)
            if unknown:
                raise ValueError(f"no {kind} {unknown} in {db_path}; it holds {sorted(known)}")
        info = dict(con.execute("SELECT key, value FROM run_info").fetchall())
        columns = {
            c
            for (c,) in con.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'predictions'"
            ).fetchall()
        }
        if "raw_answer" not in columns:
            raise ValueError(
                f"{db_path} was built before predictions kept raw replies (no column "
                "raw_answer): rerun the workflow, which rebuilds it"
            )
        where = []
        if models:
            where.append(f"p.model IN ({', '.join(_quote(m) for m in models)})")
        if perturbations:
            where.append(f"p.perturbation IN ({', '.join(_quote(x) for x in perturbations)})")
        records = con.sql(
            f"""SELECT p.model, p.modality, p.perturbation, p.severity, p.question_id,
                       q.image_id, q.question_type, q.answer_type, q.question,
                       coalesce(s.perturbed, q.question) AS asked, q.answers,
                       p.raw_answer AS raw_prediction, p.answer AS prediction, p.score,
                       p.truncated
                FROM predictions p JOIN questions q USING (question_id)
                LEFT JOIN question_sets s ON s.question_id = p.question_id
                  AND s.perturbation = p.perturbation AND s.severity = p.severity
                  AND p.modality IN ('text', 'basic_question')
                {"WHERE " + " AND ".join(where) if where else ""}
                ORDER BY p.model, p.modality, p.perturbation, p.severity, p.question_id"""
        ).pl()
    records = normalize_column(records, "prediction", "normalized_prediction")
    keys = [pl.lit(info.get(f"provenance.{k}")).alias(k) for k in PROVENANCE_KEYS]
    ordered = [*records.columns[:13], "normalized_prediction", "score", "truncated"]
    return records.select(ordered).with_columns(keys)


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def export_records(records: pl.DataFrame, out: str | os.PathLike[str], fmt: str) -> Path:
    """Write ``records`` as ``fmt`` (parquet, jsonl or csv; a list column such as the
    answers becomes a JSON array in csv) to ``out``, atomically."""
    if fmt not in FORMATS:
        raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
    with store.atomic_path(out) as tmp:
        if fmt == "parquet":
            records.write_parquet(tmp)
        elif fmt == "jsonl":
            records.write_ndjson(tmp)
        else:
            flat = records.with_columns(
                pl.col("answers").map_elements(
                    lambda a: json.dumps(list(a)), return_dtype=pl.String
                )
            )
            write_csv(flat, tmp)
    return Path(out)
