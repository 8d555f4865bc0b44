"""Snakemake adapter: write one ranker's basic-question noise levels."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.questions import basic_question_sets

start_job(snakemake.log[0])
basic_question_sets(
    snakemake.input.questions,
    snakemake.input.rankings,
    snakemake.wildcards.ranker,
    dict(zip(snakemake.params.levels, snakemake.output, strict=True)),
)
