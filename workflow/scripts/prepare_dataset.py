"""Snakemake adapter: write a dataset split's questions table and image shards."""

from vqarobust.datasets import prepare_dataset
from vqarobust.logs import setup_logging

setup_logging(snakemake.log[0])
prepare_dataset(
    snakemake.params.adapter,
    questions_out=snakemake.output.questions,
    images_out=snakemake.output.images,
    seed=snakemake.params.seed,
    shard_bytes=int(snakemake.params.shard_mb * 1024 * 1024),
    **snakemake.params.selection,
)
