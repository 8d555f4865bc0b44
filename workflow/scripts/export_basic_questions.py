"""Snakemake adapter: one basic-question dataset in the paper's structure."""

from vqarobust.logs import setup_logging
from vqarobust.materialize.questions import export_basic_questions

setup_logging(snakemake.log[0])
export_basic_questions(snakemake.input.questions, snakemake.input.rankings,
                       snakemake.output.parquet, snakemake.output.json)  # fmt: skip
