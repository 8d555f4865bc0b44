"""Snakemake adapter: VQABQ's chain-of-questions set for one generative model."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.questions import chain_question_set

setup_logging(snakemake.log[0])
chain_question_set(snakemake.input.questions, snakemake.input.rankings, snakemake.output[0],
                   snakemake.params.prompt)  # fmt: skip
