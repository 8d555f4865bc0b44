"""Snakemake adapter: materialize the SwapMix context subsets of the eval split."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.context import SwapOutputs, swap_context, swap_context_coco

setup_logging(snakemake.log[0])
settings = dict(snakemake.params.settings)
sets = dict(zip(settings.pop("perturbations"), snakemake.output.sets, strict=True))
out = SwapOutputs(snakemake.output.swaps, sets, snakemake.output.images)
shard_bytes = snakemake.params.runtime["shard_bytes"]
if hasattr(snakemake.input, "instances"):
    swap_context_coco(
        snakemake.input.questions,
        snakemake.input.clean,
        snakemake.input.source,
        snakemake.input.instances,
        out,
        shard_bytes=shard_bytes,
        **settings,
    )
else:
    swap_context(snakemake.input.questions, out, shard_bytes=shard_bytes, **settings)
