"""Snakemake adapter: score predictions and write every results table to DuckDB."""

from vqarobust.db import build_database
from vqarobust.logs import setup_logging
from vqarobust.metrics import softmax_weights

setup_logging(snakemake.log[0])
build_database(
    snakemake.output[0],
    snakemake.input.questions,
    list(snakemake.input.predictions),
    metric=snakemake.params.metric,
    weights=softmax_weights(snakemake.params.preferences),
    families=dict(snakemake.params.families),
    rscore_tolerance=snakemake.params.rscore["tolerance"],
    rscore_maximum=snakemake.params.rscore["maximum"],
    dataset_info_path=snakemake.input.info,
    question_set_paths=list(snakemake.input.question_sets),
    skipped_perturbations=dict(snakemake.params.skipped),
    image_subsets=[
        (perturbation, severity, folder)
        for (perturbation, severity), folder in zip(
            snakemake.params.image_subsets, snakemake.input.images, strict=True
        )
    ],
    seed=snakemake.params.seed,
    context={
        "swaps": snakemake.input.get("context_swaps"),
        "images": snakemake.input.get("context_images"),
        "clean": snakemake.input.images[0] if snakemake.input.images else None,
        "feature_swaps": dict(
            zip(snakemake.params.feature_sources, snakemake.input.feature_swaps, strict=True)
        ),
    }
    if hasattr(snakemake.input, "feature_swaps")
    else None,
    uncertainty=dict(snakemake.params.uncertainty),
    outside_metrics=list(snakemake.params.outside_metrics),
    attention_paths=list(snakemake.input.attention),
    vqabq={"rankings": snakemake.input.vqabq_rankings, **snakemake.params.vqabq}
    if snakemake.params.vqabq
    else None,
    # Read from the config, not params: hashing it for provenance must not rerun the job
    # whenever an unrelated setting changes (the hash is that of the run that wrote it).
    config=snakemake.config,
)
