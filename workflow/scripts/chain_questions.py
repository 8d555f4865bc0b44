"""Snakemake adapter: VQABQ's question sets (first 1, 2, 3 basic questions) for one model."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.questions import chain_question_set

start_job(snakemake.log[0])
chain_question_set(
    snakemake.input.questions,
    snakemake.input.rankings,
    list(snakemake.output),
    snakemake.params.prompt,
)
