"""Snakemake adapter: LPIPS of one corrupted subset's images against the clean ones."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.images import score_lpips

start_job(snakemake.log[0])
score_lpips(
    snakemake.input.clean,
    snakemake.input.images,
    snakemake.output[0],
    perturbation=snakemake.wildcards.corruption,
    severity=int(snakemake.wildcards.severity),
    backbone=snakemake.input.backbone,
    linear=snakemake.input.linear,
    threads=snakemake.threads,
)
