"""Snakemake adapter: materialize one (corruption, severity) subset as image shards."""

from vqarobust.generate import corrupt_subset
from vqarobust.logs import setup_logging

setup_logging(snakemake.log[0])
storage = snakemake.params.storage
corrupt_subset(
    snakemake.input[0],
    snakemake.output[0],
    corruption=snakemake.wildcards.corruption,
    severity=int(snakemake.wildcards.severity),
    global_seed=snakemake.params.seed,
    image_format=storage["image_format"],
    jpeg_quality=storage["jpeg_quality"],
    shard_bytes=int(storage["shard_mb"] * 1024 * 1024),
    threads=snakemake.threads,
)
