"""Snakemake adapter: materialize one (corruption, severity) subset as image shards."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.images import corrupt_subset

setup_logging(snakemake.log[0])
stylize = None
if snakemake.wildcards.corruption == "stylize":
    stylize = {"weights": snakemake.input.weights, "styles": snakemake.input.styles,
               **snakemake.params.stylize}  # fmt: skip
corrupt_subset(
    snakemake.input.images,
    snakemake.output[0],
    corruption=snakemake.wildcards.corruption,
    severity=int(snakemake.wildcards.severity),
    global_seed=snakemake.params.seed,
    # Shard size is read from the config, not params: it changes files, not images.
    shard_bytes=snakemake.params.runtime["shard_bytes"],
    threads=snakemake.threads,
    stylize=stylize,
    **snakemake.params.encoding,
)
