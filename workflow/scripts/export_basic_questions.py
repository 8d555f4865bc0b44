"""Snakemake adapter: one basic-question dataset in the paper's structure."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.materialize.questions import export_basic_questions

start_job(snakemake.log[0])
export_basic_questions(
    snakemake.input.questions,
    snakemake.input.rankings,
    snakemake.output.parquet,
    snakemake.output.json,
)
