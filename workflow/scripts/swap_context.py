"""Snakemake adapter: materialize the SwapMix context subsets of the eval split."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.context import swap_context

setup_logging(snakemake.log[0])
settings = dict(snakemake.params.settings)
swap_context(
    snakemake.input.questions,
    snakemake.output.images,
    snakemake.output.swaps,
    dict(zip(settings.pop("perturbations"), snakemake.output.sets, strict=True)),
    shard_bytes=int(snakemake.config["storage"]["shard_mb"] * 1024 * 1024),
    **settings,
)
