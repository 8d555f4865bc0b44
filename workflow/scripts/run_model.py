"""Snakemake adapter: run one model on every severity of one subset."""

import torch

from vqarobust.inference import Subset, run_inference
from vqarobust.logs import setup_logging

setup_logging(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
subsets = [
    Subset(snakemake.wildcards.subset, severity, images)
    for severity, images in zip(snakemake.params.severities, snakemake.input.images, strict=True)
]
run_inference(
    snakemake.wildcards.model,
    dict(snakemake.params.spec),
    snakemake.input.questions,
    subsets,
    snakemake.output[0],
)
