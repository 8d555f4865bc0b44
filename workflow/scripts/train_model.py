"""Snakemake adapter: train a reference model and save it in Hugging Face format."""

from vqarobust.logs import setup_logging
from vqarobust.models.training import train_reference_model

setup_logging(snakemake.log[0])
train_reference_model(
    snakemake.input.questions,
    snakemake.input.images,
    snakemake.output[0],
    threads=snakemake.threads,
    name=snakemake.wildcards.model,
    **snakemake.params.train,
)
