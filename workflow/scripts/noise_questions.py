"""Snakemake adapter: write one ranker's basic-question noise levels."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.questions import basic_question_sets

setup_logging(snakemake.log[0])
basic_question_sets(
    snakemake.input.questions,
    snakemake.input.rankings,
    snakemake.wildcards.ranker,
    dict(zip(snakemake.params.levels, snakemake.output, strict=True)),
)
