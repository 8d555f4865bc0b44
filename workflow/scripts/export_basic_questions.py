"""Snakemake adapter: one basic-question dataset in the paper's structure."""

import gc

gc.disable()  # for the imports, which make no garbage: start_job freezes them
from vqarobust.jobs import start_job
from vqarobust.materialize.questions import export_basic_questions

start_job(snakemake.log[0])
export_basic_questions(
    snakemake.input.questions,
    snakemake.input.rankings,
    snakemake.output.parquet,
    snakemake.output.json,
)
