"""Text MMI under the fidelity filter's two readings: keep_last (the multimodal paper's code)
and drop (its text), on a miniature of config/multimodal.yaml.

    .venv/bin/python benchmarks/filter_mmi.py WORKDIR

Writes WORKDIR/keep_last.yaml (config/multimodal.yaml on 4 easy-VQA images, both reference
checkpoints, keyboard, char_replace, synonym_replace and word_delete at severities 1-5,
the filter at 0.9 with 100 draws on every level, the shipped MiniLM since
paraphrase-mpnet-base-v2 is not here, brightness as the one corruption, no rewrite, no
LPIPS), runs the workflow on it with ``on_low_similarity: keep_last`` and reads its
DuckDB file. One run gives both readings: the filter stops at the first draw that passes,
so a question whose kept (last) draw is under 0.9 failed all 100, which is exactly the
question ``drop`` removes. Prints the removed questions per set and text MMI ("ave": per
perturbation the mean over its levels, then the mean) for keep_last, for drop with each
set losing its removed questions (clean score on all questions, and on the same kept
questions), and for drop as the project applies it (a question removed from any set
leaves every table).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import duckdb
import polars as pl
import yaml

REPO = Path(__file__).resolve().parents[1]
EDITS = ["keyboard", "char_replace", "synonym_replace", "word_delete"]
Keep = Callable[[str, int], tuple[set[int] | None, set[int] | None]]


def write_config(workdir: Path) -> Path:
    """The miniature (keep_last) in ``workdir``, with the checkpoints linked in."""
    config = yaml.safe_load((REPO / "config" / "multimodal.yaml").read_text())
    config["dataset"]["n_images"] = 4
    config["corruptions"] = ["brightness"]  # the attention analysis needs one
    config["text"].update(
        perturbations=EDITS, similarity_encoder=None, on_low_similarity="keep_last", sentence={}
    )
    config["lpips"] = {}
    workdir.mkdir(parents=True, exist_ok=True)
    if not (workdir / "checkpoints").exists():
        (workdir / "checkpoints").symlink_to(REPO / "checkpoints")
    path = workdir / "keep_last.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def text_mmi(pred: pl.DataFrame, sets: pl.DataFrame, keep: Keep) -> dict[str, float]:
    """Per model, text MMI over ``sets``' perturbations; ``keep`` gives, per set, the
    question ids scored on the perturbed set and on the clean one (None: all)."""
    out = {}
    for model in sorted(pred["model"].unique()):
        pm = pred.filter(pl.col("model") == model)
        clean = pm.filter(pl.col("perturbation") == "clean")
        per = []
        for name in sorted(sets["perturbation"].unique()):
            levels = []
            for s in sorted(sets.filter(pl.col("perturbation") == name)["severity"].unique()):
                ids, clean_ids = keep(name, s)
                p = pm.filter((pl.col("perturbation") == name) & (pl.col("severity") == s))
                if ids is not None:
                    p = p.filter(pl.col("question_id").is_in(list(ids)))
                c = (
                    clean
                    if clean_ids is None
                    else clean.filter(pl.col("question_id").is_in(list(clean_ids)))
                )
                levels.append((c["score"].mean() - p["score"].mean()) / c["score"].mean())
            per.append(sum(levels) / len(levels))
        out[model] = round(sum(per) / len(per), 4)
    return out


def report(db: Path) -> None:
    with duckdb.connect(str(db), read_only=True) as con:
        pred = con.sql(
            "SELECT model, perturbation, severity, question_id, score FROM predictions"
        ).pl()
        sets = con.sql(
            "SELECT perturbation, severity, question_id, similarity FROM question_sets"
        ).pl()
        table = con.sql(
            "SELECT model, mmi FROM mmi WHERE modality = 'text' AND scope = 'all' "
            "AND \"group\" = 'all' ORDER BY model"
        ).fetchall()
    low = sets.filter(pl.col("similarity") < 0.9)
    every = set(sets["question_id"])
    removed = {
        (k[0], k[1]): set(g["question_id"]) for k, g in low.group_by("perturbation", "severity")
    }
    print(f"{len(every)} questions; removed per set (severities 1-5):")
    print(
        low.group_by("perturbation", "severity")
        .len()
        .pivot(on="severity", index="perturbation", values="len", sort_columns=True)
    )

    def kept(name: str, s: int) -> set[int]:
        return every - removed.get((name, s), set())

    survivors = every - set(low["question_id"])
    print("keep_last, table mmi:", dict(table))
    print("keep_last, recomputed:", text_mmi(pred, sets, lambda n, s: (None, None)))
    print("drop per set, clean on all:", text_mmi(pred, sets, lambda n, s: (kept(n, s), None)))
    print(
        "drop per set, clean on the kept:",
        text_mmi(pred, sets, lambda n, s: (kept(n, s), kept(n, s))),
    )
    print(
        f"drop as the project applies it: {len(survivors)} questions left",
        text_mmi(pred, sets, lambda n, s: (survivors, survivors)) if survivors else "",
    )
    for name in EDITS:
        one = sets.filter(pl.col("perturbation") == name)
        print(
            f"  {name}: keep_last",
            text_mmi(pred, one, lambda n, s: (None, None)),
            "drop",
            text_mmi(pred, one, lambda n, s: (kept(n, s), None)),
        )


def main(workdir: Path) -> None:
    config = write_config(workdir)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(REPO / "Snakefile"),
            "-d",
            str(workdir),
            "--configfile",
            str(config),
            "--replace-workflow-config",
            "--cores",
            "2",
        ],
        check=True,
    )
    report(workdir / "results" / "easy-vqa-multimodal" / "robustness.duckdb")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
