"""Snakemake adapter: write a dataset split's questions, image shards, manifest and info."""

from vqarobust.datasets import prepare_dataset
from vqarobust.logs import setup_logging

setup_logging(snakemake.log[0])
prepare_dataset(
    snakemake.params.adapter,
    questions_out=snakemake.output.questions,
    images_out=snakemake.output.images,
    manifest_out=snakemake.output.manifest,
    info_out=snakemake.output.info,
    # Shard size is read from the config, not params: it changes files, not images.
    shard_bytes=snakemake.params.runtime["shard_bytes"],
    **dict(snakemake.input.items()),
    **snakemake.params.selection,
)
