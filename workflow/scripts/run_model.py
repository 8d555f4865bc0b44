"""Snakemake adapter: run one model on every severity of one subset."""

import torch

from vqarobust.inference import Subset, run_inference
from vqarobust.logs import setup_logging
from vqarobust.params import runtime_options

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
    # Batch size and the like come from the config, not params: they never change answers.
    options=runtime_options(snakemake.config["models"][snakemake.wildcards.model]),
)
