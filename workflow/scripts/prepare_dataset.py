"""Snakemake adapter: write a dataset split's questions, image shards, manifest and info."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.datasets import PreparedOutputs, prepare_dataset
from vqarobust.jobs import start_job

# A hub dataset is fetched only with dataset.download (then a param of this job).
start_job(snakemake.log[0], allow_download=snakemake.params.selection.get("download", False))
out = PreparedOutputs(
    snakemake.output.questions,
    snakemake.output.images,
    snakemake.output.manifest,
    snakemake.output.info,
    # Shard size travels through the runtime channel: it changes files, not images.
    shard_bytes=snakemake.params.runtime["shard_bytes"],
)
prepare_dataset(
    snakemake.params.adapter,
    out,
    **dict(snakemake.input.items()),
    **snakemake.params.selection,
)
