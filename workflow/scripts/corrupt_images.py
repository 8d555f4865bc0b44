"""Snakemake adapter: materialize one (corruption, severity) subset as image shards."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust import store
from vqarobust.jobs import start_job
from vqarobust.materialize.images import corrupt_subset

start_job(snakemake.log[0])
options = dict(snakemake.params.options)
if snakemake.input.get("weights"):  # a corruption built from the stylize block
    options = {
        "weights": snakemake.input.weights,
        "styles": snakemake.input.styles,
        **snakemake.params.stylize,
    }
elif snakemake.input.get("boxes"):
    options = {"boxes": snakemake.input.boxes}
corrupt_subset(
    snakemake.input.images,
    snakemake.output[0],
    corruption=snakemake.wildcards.corruption,
    severity=int(snakemake.wildcards.severity),
    global_seed=snakemake.params.seed,
    # Shard size travels through the runtime channel: it changes files, not images.
    storage=store.ImageStorage(
        shard_bytes=snakemake.params.runtime["shard_bytes"], **snakemake.params.encoding
    ),
    threads=snakemake.threads,
    options=options,
    ssim_window=snakemake.params.ssim["window"],
)
