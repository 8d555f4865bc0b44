"""The "How answers change" section: the answer grids of the sample questions, the most
frequent answer flips, the kinds of mistakes with seeded examples, and the colour bias on
grayscale images."""

from __future__ import annotations

import json
from typing import Any

import duckdb
import matplotlib.figure
import polars as pl

from vqarobust.corruptions import COLOUR_BIAS, CORRUPTIONS, diagnostic, family
from vqarobust.metrics.colour_bias import DECOLOURED_ANSWER, GREYS
from vqarobust.metrics.mispredictions import KINDS
from vqarobust.report import figures as fig
from vqarobust.report.outputs import N_ANSWER_GRIDS
from vqarobust.report.sections.base import Data, Run, Section, b64
from vqarobust.summary import table_names

N_FLIPS = 8  # most frequent answer flips shown per model


def answer_flips(con: duckdb.DuckDBPyConnection, n: int = N_FLIPS) -> pl.DataFrame:
    """Per model and modality (image corruptions, text perturbations), the most frequent
    (clean answer -> perturbed answer) changes among questions answered differently under
    a perturbation of the VRE tables than on the clean image."""
    return con.sql(
        f"""WITH flips AS (
                SELECT p.model, p.modality, c.answer AS clean_answer,
                       p.answer AS perturbed_answer, count(*) AS n
                FROM predictions p JOIN predictions c
                  ON c.model = p.model AND c.question_id = p.question_id AND c.severity = 0
                  AND c.modality = 'clean'
                WHERE p.severity > 0 AND p.answer <> c.answer
                  AND (p.modality, p.perturbation) IN (
                      SELECT (modality, perturbation) FROM vre_perturbation)
                GROUP BY ALL)
            SELECT model, modality, clean_answer, perturbed_answer, n FROM (
                SELECT *, row_number() OVER (PARTITION BY model, modality
                          ORDER BY n DESC, clean_answer, perturbed_answer) AS k FROM flips)
            WHERE k <= {int(n)}
            ORDER BY model, modality, n DESC, clean_answer, perturbed_answer"""
    ).pl()


def mispredictions(con: duckdb.DuckDBPyConnection) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Misprediction kinds per model x modality (counts over every perturbation and
    severity, and each kind's share), and the stored examples."""
    if "mispredictions" not in table_names(con):
        return pl.DataFrame(), pl.DataFrame()
    long = con.sql(
        "SELECT model, modality, kind, CAST(sum(n) AS BIGINT) AS n FROM mispredictions GROUP BY ALL"
    ).pl()
    if long.is_empty():
        return pl.DataFrame(), con.sql("SELECT * FROM misprediction_examples").pl()
    wide = long.pivot("kind", index=["model", "modality"], values="n").fill_null(0)
    present = [k for k in KINDS if k in wide.columns]
    wide = wide.with_columns(pl.sum_horizontal(present).alias("mispredictions"))
    wide = wide.with_columns(
        [(pl.col(k).cast(pl.Float64) / pl.col("mispredictions")).alias(k) for k in present]
    )
    wide = wide.select("model", "modality", "mispredictions", *present).sort("model", "modality")
    examples = con.sql("SELECT * FROM misprediction_examples ORDER BY ALL").pl()
    return wide, examples


def examples_context(examples: pl.DataFrame) -> list[dict[str, Any]]:
    """Each stored example with its clean image and the image the model saw (base64)."""
    return [
        {**r, "images": [("clean", b64(r["clean_png"])), ("seen", b64(r["perturbed_png"]))]}
        for r in examples.iter_rows(named=True)
    ]


def _colour(con: duckdb.DuckDBPyConnection, outside: list[str]) -> dict[str, Any] | None:
    """Colour answers on grayscale images (the visual-robustness paper's Figure A.4);
    None when the run has no grayscale subset."""
    if "colour_bias" not in table_names(con):
        return None
    bias = con.sql("SELECT * FROM colour_bias ORDER BY model").pl()
    if bias.is_empty():
        return None
    examples = con.sql("SELECT * FROM colour_bias_examples ORDER BY model, rank").pl()
    return {
        "bias": bias,
        "greys": ", ".join(sorted(GREYS)),
        "kept_out": any(diagnostic(p) == COLOUR_BIAS for p in outside),
        "examples": [
            {**r, "images": [(DECOLOURED_ANSWER, b64(r["png"]))]}
            for r in examples.iter_rows(named=True)
        ],
    }


def _samples(con: duckdb.DuckDBPyConnection) -> list[dict]:
    """Per sample question: its text, most common answer, thumbnails and every model's
    answers on the clean and corrupted images."""
    thumbs = con.sql("SELECT * FROM sample_images").pl()
    # The first model with attention maps draws its attention over the grid's images.
    attention = (
        con.sql("SELECT * FROM attention_maps ORDER BY model").pl()
        if "attention_maps" in table_names(con)
        else pl.DataFrame(schema={"model": pl.String, "question_id": pl.Int64})
    )
    if attention.height:
        attention = attention.filter(pl.col("model") == attention["model"][0])
    out = []
    for qid in sorted(set(thumbs["question_id"])):
        q = con.execute(
            "SELECT question, answers FROM questions WHERE question_id = ?", [qid]
        ).fetchall()[0]
        answers = con.sql(
            "SELECT model, perturbation, severity, answer, score FROM predictions "
            f"WHERE question_id = {int(qid)} AND modality IN ('clean', 'image')"
        ).pl()
        truth = max(set(q[1]), key=lambda a: (q[1].count(a), a))
        out.append(
            {
                "question": q[0],
                "truth": truth,
                "answers": answers,
                "thumbs": thumbs.filter(pl.col("question_id") == qid),
                "attention": attention.filter(pl.col("question_id") == qid),
            }
        )
    return out


def read(con: duckdb.DuckDBPyConnection, run: Run) -> Data:
    """Flips, misprediction kinds and examples, the colour bias and the sample questions."""
    kinds, kind_examples = mispredictions(con)
    return {
        "flips": answer_flips(con),
        "kinds": kinds,
        "kind_examples": kind_examples,
        "colour": _colour(con, json.loads(run.info.get("outside_metrics", "[]"))),
        "samples": _samples(con),
    }


def tables(data: Data) -> dict[str, pl.DataFrame]:
    """``answer_flips.csv`` and ``misprediction_kinds.csv``."""
    return {"answer_flips": data["flips"], "misprediction_kinds": data["kinds"]}


def _registry_family(name: str) -> str:
    """The class the corruption registry gives ``name``; ``control`` for the clean
    subset and for names it does not hold."""
    return family(name) if name in CORRUPTIONS.list() else "control"


def figures(data: Data, run: Run) -> dict[str, matplotlib.figure.Figure]:
    """One answer grid per sample question (a placeholder where there are fewer)."""
    samples, out = data["samples"], {}
    for k in range(1, N_ANSWER_GRIDS + 1):
        if k > len(samples):
            out[f"answer_grid_{k}"] = fig.placeholder(f"No sample question {k}.")
            continue
        s = samples[k - 1]
        # Controls (blank) are no corruption class; the grid shows them last. A
        # corruption outside the VRE tables (grayscale) keeps its registry class.
        shown = {
            p: run.families.get(p) or _registry_family(p) for p in set(s["thumbs"]["perturbation"])
        }
        maps = s["attention"]
        out[f"answer_grid_{k}"] = fig.answer_grid(
            s["question"],
            s["truth"],
            s["thumbs"],
            s["answers"],
            shown,
            maps if maps.height else None,
            maps["model"][0] if maps.height else None,
        )
    return out


def context(data: Data, run: Run) -> dict[str, Any]:
    """The grids shown, the flips, the kinds with their examples, the colour bias."""
    del run
    return {
        "sample_grids": list(range(1, min(len(data["samples"]), N_ANSWER_GRIDS) + 1)),
        "flips": data["flips"],
        "kinds": data["kinds"],
        "examples": examples_context(data["kind_examples"]),
        "colour": data["colour"],
    }


SECTION = Section(
    "failures",
    ("samples", "mispredictions", "colour_bias", "attention"),
    context,
    read,
    figures,
    tables,
)
