"""Snakemake adapter: materialize the SwapMix context subsets of the eval split."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust import store
from vqarobust.jobs import start_job
from vqarobust.materialize.context import (
    CocoSources,
    SwapOutputs,
    SwapSettings,
    swap_context,
    swap_context_coco,
)

start_job(snakemake.log[0])
settings = dict(snakemake.params.settings)
sets = dict(zip(settings.pop("perturbations"), snakemake.output.sets, strict=True))
out = SwapOutputs(snakemake.output.swaps, sets, snakemake.output.images)
swaps = SwapSettings(settings.pop("seed"), settings.pop("k"), settings.pop("max_objects"))
shard_bytes = snakemake.params.runtime["shard_bytes"]
if hasattr(snakemake.input, "instances"):
    sources = CocoSources(snakemake.input.clean, snakemake.input.source, snakemake.input.instances)
    storage = store.ImageStorage(
        settings.pop("image_format"), settings.pop("jpeg_quality"), shard_bytes
    )
    swap_context_coco(snakemake.input.questions, sources, out, swaps, storage=storage, **settings)
else:
    swap_context(snakemake.input.questions, out, swaps, shard_bytes=shard_bytes, **settings)
