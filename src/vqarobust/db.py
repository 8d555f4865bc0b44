"""Load questions and predictions into DuckDB and compute every results table there.

Table names are part of the interface (docs/workflow.md): ``questions``, ``predictions``,
``accuracy``, ``question_type_accuracy``, ``answer_type_accuracy``, ``submetrics``,
``vre_model``, ``vre_corruption``, ``mmi``, ``rscore``, plus ``vre_sweep``,
``image_reliance`` (the blank control), ``question_sets`` (the perturbed questions),
``sample_images`` (thumbnails for the report's answer grid), ``model_cards`` (family,
checkpoint, parameters, clean accuracy, VRE), ``mispredictions`` and
``misprediction_examples`` (the kinds of mistakes), ``question_type_perturbation``,
``skipped_perturbations``, ``skipped_images`` and ``run_info``; the view
``corruption_accuracy`` is the image part of ``accuracy`` under its old column name.
Every subset is a (modality, perturbation, severity); clean rows are modality ``clean``,
perturbation ``clean``, severity 0. Reports read only this file.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import polars as pl

from vqarobust import store
from vqarobust.corruptions.controls import CONTROL
from vqarobust.metrics import score_predictions
from vqarobust.metrics.attention import attention_shift_table, attention_shifts
from vqarobust.metrics.colour_bias import (
    GRAYSCALE,
    colour_bias_examples,
    colour_bias_table,
    colour_rows,
)
from vqarobust.metrics.context import context_tables, example_images, flipped_swaps
from vqarobust.metrics.coverage import check_coverage, fidelity_drops
from vqarobust.metrics.image_quality import quality_correlation, quality_table, read_quality
from vqarobust.metrics.intervals import uncertainty_tables
from vqarobust.metrics.mispredictions import EXAMPLE_SCHEMA as MISPREDICTION_EXAMPLES
from vqarobust.metrics.mispredictions import (
    misprediction_examples,
    misprediction_rows,
    misprediction_table,
)
from vqarobust.metrics.modalities import modality_tables
from vqarobust.metrics.rscore import DEFAULT_MAXIMUM, DEFAULT_TOLERANCE
from vqarobust.metrics.uncertainty import Settings
from vqarobust.model_cards import card_rows
from vqarobust.provenance import PACKAGES, package_version, prediction_records
from vqarobust.provenance import collect as collect_provenance
from vqarobust.samples import sample_images, sample_questions

log = logging.getLogger(__name__)

ACCURACY_KEYS = ("model", "modality", "perturbation", "severity")
# The "model" of the mean over models in question_type_perturbation (no model name can
# start with a parenthesis: the config schema's pattern).
ALL_MODELS = "(mean)"


def read_predictions(paths: Sequence[str | os.PathLike[str]]) -> pl.DataFrame:
    """Concatenate prediction Parquet files; duplicate (model, modality, perturbation,
    severity, question_id) rows are an error, since they would silently weigh some
    questions twice."""
    if not paths:
        raise ValueError("no prediction files given")
    df = pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")
    missing = set(store.PREDICTION_SCHEMA.names) - set(df.columns)
    if missing:
        raise ValueError(f"prediction files lack columns {sorted(missing)}")
    keys = ["model", "modality", "perturbation", "severity", "question_id"]
    dup = df.group_by(keys).len().filter(pl.col("len") > 1)
    if dup.height:
        raise ValueError(f"{dup.height} duplicated predictions, e.g.\n{dup.head(5)}")
    return df


def read_question_sets(paths: Sequence[str | os.PathLike[str]]) -> pl.DataFrame:
    """The perturbed question sets, one table (``store.QUESTION_SET_SCHEMA``)."""
    frames = [pl.read_parquet(p) for p in paths]
    if not frames:
        return pl.from_arrow(store.QUESTION_SET_SCHEMA.empty_table())
    return pl.concat(frames, how="vertical_relaxed")


# A model whose accuracy without the image (blank control) reaches this share of its clean
# accuracy uses the image little; the report says so next to its robustness numbers.
IMAGE_RELIANCE_RATIO = 0.8


def image_reliance(accuracy: pl.DataFrame, controls: Sequence[str]) -> pl.DataFrame:
    """Per model and control: clean accuracy, accuracy on the control (without the
    image), their ratio and whether the model ``uses_image_little`` (ratio at least
    ``IMAGE_RELIANCE_RATIO``)."""
    clean = accuracy.filter(pl.col("severity") == 0).select(
        "model", pl.col("accuracy").alias("clean_accuracy")
    )
    blank = accuracy.filter(pl.col("perturbation").is_in(list(controls))).select(
        "model",
        pl.col("perturbation").alias("control"),
        pl.col("accuracy").alias("control_accuracy"),
    )
    ratio = pl.when(pl.col("clean_accuracy") > 0).then(
        pl.col("control_accuracy") / pl.col("clean_accuracy")
    )
    return (
        clean.join(blank, on="model")
        .with_columns(ratio.alias("ratio"))
        .with_columns(
            (pl.col("ratio") >= IMAGE_RELIANCE_RATIO).fill_null(False).alias("uses_image_little")
        )
        .sort("model", "control")
    )


def _context_paper_tables(
    scored: pl.DataFrame,
    context: Mapping[str, Any] | None,
    config: Mapping[str, Any] | None,
) -> dict[str, pl.DataFrame]:
    """``model_inputs``, ``feature_swaps`` and ``context_reliance_k`` (docs/context.md):
    each context prediction's swap rank comes from the swap table of what its model
    reads (the pixel swaps, or its feature source's swaps)."""
    from vqarobust.metrics.context_paper import model_inputs, reliance_at_k

    if config is None:
        return {}
    inputs = model_inputs(config["models"], config.get("features", {}))
    tables = {"model_inputs": inputs}
    if not context:
        return tables
    swap_tables: dict[str, pl.DataFrame] = {}
    if context.get("swaps"):
        swap_tables["pixels"] = pl.read_parquet(context["swaps"])
    feature = [pl.read_parquet(path).with_columns(pl.lit(source).alias("source"))
               for source, path in (context.get("feature_swaps") or {}).items()]  # fmt: skip
    for frame in feature:
        swap_tables[frame["source"][0] if frame.height else ""] = frame
    if feature:
        tables["feature_swaps"] = pl.concat(feature)
    keys = ["question_id", "perturbation", "severity", "rank"]
    # The pixel swap table has int8 severities, the feature swap tables int16.
    ranks = [swap_tables[r["inputs"]].select(keys).with_columns(pl.lit(r["model"]).alias("model"),
                                                                pl.col("severity").cast(pl.Int8),
                                                                pl.col("rank").cast(pl.Int8))
             for r in inputs.iter_rows(named=True) if r["inputs"] in swap_tables]  # fmt: skip
    if ranks:
        ranked = pl.concat(ranks)
        settings = config.get("context", {})
        ks = list(settings.get("reliance_k") or [settings.get("k", 3)])
        tables["context_reliance_k"] = reliance_at_k(scored, ranked, ks)
    return tables


def build_database(
    db_path: str | os.PathLike[str],
    questions_path: str | os.PathLike[str],
    prediction_paths: Sequence[str | os.PathLike[str]],
    metric: str = "vqa_accuracy",
    weights: Mapping[str, float] | None = None,
    families: Mapping[str, str] | None = None,
    rscore_tolerance: float = DEFAULT_TOLERANCE,
    rscore_maximum: float = DEFAULT_MAXIMUM,
    dataset_info_path: str | os.PathLike[str] | None = None,
    question_set_paths: Sequence[str | os.PathLike[str]] | None = None,
    skipped_perturbations: Mapping[str, str] | None = None,
    image_subsets: Sequence[tuple[str, int, str | os.PathLike[str]]] | None = None,
    seed: int = 0,
    context: Mapping[str, str | os.PathLike[str]] | None = None,
    uncertainty: Mapping[str, object] | Settings | None = None,
    config: Mapping[str, Any] | None = None,
    on_missing: str = "error",
    outside_metrics: Sequence[str] = (),
    attention_paths: Sequence[str | os.PathLike[str]] = (),
    vqabq: Mapping[str, Any] | None = None,
) -> dict[str, int]:
    """Write ``db_path`` atomically with all tables; returns the row count of each table.

    ``families`` maps perturbation names to their class (corruption class; ``char`` or
    ``word`` for text perturbations; the ranker for basic questions), stored with the
    metric tables. ``question_set_paths`` are the perturbed question sets (table
    ``question_sets``); ``skipped_perturbations`` names configured perturbations that could
    not run here, with the reason (table ``skipped_perturbations``). ``image_subsets`` are
    (perturbation, severity, image folder) of the clean and corrupted images: thumbnails of
    a few seeded sample questions' images go into ``sample_images`` (``seed`` picks them).
    ``dataset_info_path`` is the prepared dataset's ``dataset.json``: its counts go into
    ``run_info`` and its skipped images into ``skipped_images``. ``context`` (keys
    ``swaps``, ``images``, ``clean``: the swap table, the swapped images, the clean
    images) adds the SwapMix tables ``context_swaps`` and ``context_examples``;
    ``context_reliance`` and ``effective_accuracy`` are always written (empty without
    context predictions). ``uncertainty`` (the config section of that name, or
    :class:`~vqarobust.metrics.uncertainty.Settings`) sets the bootstrap behind the tables
    ``intervals``, ``model_comparisons``, ``rank_stability``, ``drop_tests`` and
    ``effective_robustness`` (:mod:`vqarobust.metrics.intervals`). ``config`` (the
    resolved workflow config) is hashed into the ``provenance.*`` keys of ``run_info``
    (:func:`vqarobust.provenance.collect`), with the code, versions, dataset and weights.
    A model without clean predictions, or lacking a (perturbation, severity) another model
    has, is an error (:class:`vqarobust.metrics.coverage.MissingRowsError`) unless
    ``on_missing="drop"``: then they are left out of every metric table (and of the
    bootstrap) with a warning that lands in ``run_info.warnings`` and the report.
    ``outside_metrics`` names image perturbations kept out of the robustness metrics (VRE,
    MMI, R_score, the bootstrap): grayscale, unless ``vre.include_grayscale``, whose colour
    questions are scored against labels that no longer hold; their accuracy, question-type
    and misprediction rows stay, and grayscale gets the ``colour_bias`` tables.
    ``attention_paths`` are the attention maps of the models that expose them
    (:mod:`vqarobust.attention`): tables ``attention_maps``, ``attention_shifts`` (JS
    divergence from the clean map per question) and ``attention_shift`` (per model x
    corruption x severity).
    ``vqabq`` (keys ``rankings``, the ranker's rankings file, and ``ranker``,
    ``thresholds``, ``grid``, ``tune_share``) adds the VQABQ tables ``vqabq_scores``,
    ``vqabq_selection`` and ``vqabq`` (:mod:`vqarobust.metrics.vqabq`).
    """
    settings = (
        uncertainty if isinstance(uncertainty, Settings) else Settings.from_mapping(uncertainty)
    )
    dataset_info = (
        json.loads(Path(dataset_info_path).read_text(encoding="utf-8")) if dataset_info_path else {}
    )
    questions = pl.from_arrow(store.read_questions(questions_path))
    predictions = read_predictions(prediction_paths)
    unknown = predictions.join(questions.select("question_id"), on="question_id", how="anti")
    if unknown.height:
        raise ValueError(
            f"{unknown.height} predictions refer to question ids not in {questions_path}"
        )
    scored = score_predictions(predictions, questions, metric)
    sets = read_question_sets(question_set_paths or [])
    drops, dropped_ids = fidelity_drops(sets)
    notes: list[str] = []
    if dropped_ids:
        # Paired comparisons need one question set for every subset (docs/text.md).
        keep = ~pl.col("question_id").is_in(dropped_ids)
        questions, scored = questions.filter(keep), scored.filter(keep)
        notes.append(
            f"fidelity filter (on_low_similarity: drop): {len(dropped_ids)} questions some "
            "perturbed set dropped are left out of every table, clean and image subsets "
            f"included; {questions.height} questions remain (table fidelity_drops)"
        )
        log.warning("%s", notes[-1])
    counts: dict[str, int] = {}
    with store.atomic_path(db_path) as tmp, duckdb.connect(str(tmp)) as con:
        con.register("questions_df", questions.to_arrow())
        con.register("scored_df", scored.to_arrow())
        con.execute("CREATE TABLE questions AS SELECT * FROM questions_df")
        con.execute(
            """CREATE TABLE predictions AS
               SELECT model, modality, perturbation, CAST(severity AS TINYINT) AS severity,
                      question_id, answer, score, truncated
               FROM scored_df ORDER BY ALL"""
        )
        con.execute(
            """CREATE TABLE accuracy AS
               SELECT model, modality, perturbation, severity, count(*) AS n,
                      avg(score) AS accuracy, count(*) FILTER (truncated) AS truncated
               FROM predictions GROUP BY ALL ORDER BY ALL"""
        )
        con.execute(
            """CREATE VIEW corruption_accuracy AS
               SELECT model, perturbation AS corruption, severity, n, accuracy
               FROM accuracy WHERE modality IN ('clean', 'image')"""
        )
        for kind in ("question_type", "answer_type"):
            con.execute(
                f"""CREATE TABLE {kind}_accuracy AS
                    SELECT p.model, p.modality, p.perturbation, p.severity, q.{kind},
                           count(*) AS n, avg(p.score) AS accuracy
                    FROM predictions p JOIN questions q USING (question_id)
                    GROUP BY ALL ORDER BY ALL"""
            )
        # Table A.2 of the visual-robustness paper: accuracy per question type x
        # perturbation (severities 1.. pooled), per model and as the mean over models.
        con.execute(
            f"""CREATE TABLE question_type_perturbation AS
                WITH per AS (
                    SELECT model, modality, perturbation, question_type, sum(n) AS n,
                           sum(accuracy * n) / sum(n) AS accuracy
                    FROM question_type_accuracy
                    WHERE modality NOT IN ('context', 'vqabq')
                      AND (severity > 0 OR modality = 'clean')
                    GROUP BY ALL)
                SELECT * FROM per
                UNION ALL
                SELECT '{ALL_MODELS}' AS model, modality, perturbation, question_type,
                       max(n) AS n, avg(accuracy) AS accuracy
                FROM per GROUP BY ALL
                ORDER BY ALL"""
        )
        skipped = pl.DataFrame(
            dataset_info.get("skipped_images", []),
            schema={"image_id": pl.Int64, "reason": pl.String},
        )
        con.register("skipped_df", skipped.to_arrow())
        con.execute("CREATE TABLE skipped_images AS SELECT * FROM skipped_df")
        skipped_p = pl.DataFrame(
            [{"perturbation": k, "reason": v} for k, v in (skipped_perturbations or {}).items()],
            schema={"perturbation": pl.String, "reason": pl.String},
        )
        con.register("skipped_p_df", skipped_p.to_arrow())
        con.execute("CREATE TABLE skipped_perturbations AS SELECT * FROM skipped_p_df")
        con.register("sets_df", sets.to_arrow())
        con.execute("CREATE TABLE question_sets AS SELECT * FROM sets_df ORDER BY ALL")
        con.register("drops_df", drops.to_arrow())
        con.execute("CREATE TABLE fidelity_drops AS SELECT * FROM drops_df ORDER BY ALL")
        picked = sample_questions(questions, seed)
        thumbs = sample_images(picked, image_subsets or [])
        con.register("samples_df", thumbs.to_arrow())
        con.execute("CREATE TABLE sample_images AS SELECT * FROM samples_df ORDER BY ALL")
        # How answers break (docs/metrics.md, "Misprediction kinds").
        wrong = misprediction_rows(scored, questions)
        folders = {(p, int(v)): f for p, v, f in (image_subsets or [])}
        kinds = {
            "mispredictions": misprediction_table(wrong),
            "misprediction_examples": misprediction_examples(wrong, questions, folders, seed)
            if ("clean", 0) in folders
            else pl.DataFrame(schema=MISPREDICTION_EXAMPLES),
        }
        for name, df in kinds.items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        colour = colour_rows(scored, questions)
        grey_folder = folders.get((GRAYSCALE, 1))
        bias = {
            "colour_bias": colour_bias_table(colour),
            "colour_bias_examples": colour_bias_examples(colour, questions, grey_folder, seed),
        }
        for name, df in bias.items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        maps = (
            pl.concat([pl.read_parquet(p) for p in attention_paths])
            if attention_paths
            else pl.from_arrow(store.ATTENTION_SCHEMA.empty_table())
        )
        if vqabq:
            from vqarobust.metrics.vqabq import vqabq_tables

            made = vqabq_tables(
                scored, questions, pl.read_parquet(vqabq["rankings"]), vqabq["ranker"],
                vqabq["thresholds"], bool(vqabq.get("grid")), float(vqabq.get("tune_share", 0.5)),
                seed,
            )  # fmt: skip
            for name, df in made.items():
                con.register(f"{name}_df", df.to_arrow())
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        shifts = attention_shifts(maps)
        for name, df in (("attention_maps", maps), ("attention_shifts", shifts),
                         ("attention_shift", attention_shift_table(shifts))):  # fmt: skip
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df ORDER BY ALL")
        for name, df in context_tables(scored).items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        if context and context.get("swaps"):
            swaps = pl.read_parquet(context["swaps"])
            flips = flipped_swaps(scored, swaps, seed)
            examples = example_images(flips, questions, str(context["clean"]),
                                      str(context["images"]))  # fmt: skip
            for name, df in (("context_swaps", swaps), ("context_examples", examples)):
                con.register(f"{name}_df", df.to_arrow())
                con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df ORDER BY ALL")
        for name, df in _context_paper_tables(scored, context, config).items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df ORDER BY ALL")
        # Swaps are no severities: the context modality has its own tables above.
        # VQABQ's chain subset (some models only) is no perturbation either.
        all_accuracy = con.sql(
            "SELECT * FROM accuracy WHERE modality NOT IN ('context', 'vqabq')"
        ).pl()
        # Controls (class "control": the blank images) are no perturbation: they stay out
        # of the robustness metrics and get their own table.
        controls = sorted(c for c, f in (families or {}).items() if f == CONTROL)
        outside = sorted(set(outside_metrics))
        accuracy = all_accuracy.filter(~pl.col("perturbation").is_in([*controls, *outside]))
        families = {c: f for c, f in (families or {}).items()
                    if f != CONTROL and c not in outside}  # fmt: skip
        reliance = image_reliance(all_accuracy, controls)
        # The bootstrap sees exactly the rows the point tables do.
        scored = scored.filter(~pl.col("perturbation").is_in(outside))
        con.register("reliance_df", reliance.to_arrow())
        con.execute("CREATE TABLE image_reliance AS SELECT * FROM reliance_df")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kept = check_coverage(accuracy, on_missing, "robustness tables", key="perturbation")
            if kept.height < accuracy.height:
                # The bootstrap sees exactly the rows the point tables do.
                gone = accuracy.join(kept, on=list(ACCURACY_KEYS), how="anti")
                no_model = set(accuracy["model"]) - set(kept["model"])
                scored = scored.filter(~pl.col("model").is_in(sorted(no_model))).join(
                    gone.select(*ACCURACY_KEYS).with_columns(pl.col("severity").cast(pl.Int8)),
                    on=list(ACCURACY_KEYS), how="anti",
                )  # fmt: skip
                accuracy = kept
            tables = modality_tables(accuracy, weights, families, rscore_tolerance,
                                     rscore_maximum, on_missing)  # fmt: skip
            quality_images = read_quality(image_subsets or [])
        for w in caught:
            log.warning("%s", w.message)
        for name, df in tables.items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        started = time.perf_counter()
        extra = uncertainty_tables(
            scored,
            questions,
            settings,
            weights,
            families,
            controls,
            rscore_tolerance,
            rscore_maximum,
        )
        log.info("uncertainty tables (%d resamples, cluster %s) in %.1f s",
                 settings.resamples, settings.cluster, time.perf_counter() - started)  # fmt: skip
        for name, df in extra.items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df")
        if config is not None:
            from vqarobust.metrics.context_paper import context_findings

            findings = context_findings(con.sql("SELECT * FROM model_inputs").pl(),
                                        con.sql("SELECT * FROM context_reliance").pl(),
                                        extra["model_comparisons"])  # fmt: skip
            con.register("findings_df", findings.to_arrow())
            con.execute("CREATE TABLE context_findings AS SELECT * FROM findings_df")
        quality = quality_table(quality_images)
        calibration = {
            "image_quality_images": quality_images,
            "image_quality": quality,
            "image_quality_correlation": quality_correlation(
                quality, accuracy, sorted(set(quality["perturbation"]) - {*controls, *outside})
            ),
        }
        for name, df in calibration.items():
            con.register(f"{name}_df", df.to_arrow())
            con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_df ORDER BY ALL")
        cards = card_rows(prediction_records(prediction_paths))
        con.register("cards_df", cards.to_arrow())
        con.execute(
            """CREATE TABLE model_cards AS
               SELECT c.model, c.family, c.checkpoint, c.parameters,
                      a.accuracy AS clean_accuracy, v.vre, i.low AS vre_low, i.high AS vre_high
               FROM cards_df c
               LEFT JOIN accuracy a ON a.model = c.model AND a.modality = 'clean'
               LEFT JOIN vre_model v ON v.model = c.model AND v.modality = 'image'
               LEFT JOIN intervals i ON i.metric = 'vre_model' AND i.model = c.model
                 AND i.modality = 'image'
               ORDER BY c.model"""
        )
        info = {
            "metric": metric,
            "weights": json.dumps(dict(weights) if weights else "uniform"),
            "rscore": json.dumps({"tolerance": rscore_tolerance, "maximum": rscore_maximum}),
            "warnings": json.dumps(notes + [str(w.message) for w in caught]),
            "uncertainty": json.dumps(dataclasses.asdict(settings)),
            "outside_metrics": json.dumps(outside),
        }
        for package in PACKAGES:
            info[f"version.{package}"] = package_version(package)
        for key, value in dataset_info.items():
            if key != "skipped_images":
                info[f"dataset.{key}"] = value if isinstance(value, str) else json.dumps(value)
        dataset_files = {"questions": questions_path}
        if dataset_info_path:
            dataset_files["info"] = dataset_info_path
            manifest = Path(dataset_info_path).with_name("manifest.txt")
            if manifest.is_file():
                dataset_files["manifest"] = manifest
        info.update(
            collect_provenance(
                config=config,
                prediction_paths=prediction_paths,
                dataset_files=dataset_files,
                dataset_info=dataset_info,
                seed=seed,
            )  # fmt: skip
        )
        con.execute("CREATE TABLE run_info (key VARCHAR, value VARCHAR)")
        con.executemany("INSERT INTO run_info VALUES (?, ?)", list(info.items()))
        for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
            counts[table] = con.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
    log.info("wrote %s: %s", Path(db_path), counts)
    return counts
