"""Snakemake adapter: assemble the analyses' tables into the DuckDB results file."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from pathlib import Path

from vqarobust.analyses.assemble import assemble_database
from vqarobust.jobs import start_job

start_job(snakemake.log[0])
assemble_database(
    snakemake.output[0],
    list(snakemake.input.tables),
    {"questions": snakemake.input.questions, "info": snakemake.input.info},
    list(snakemake.input.predictions),
    snakemake.params.seed,
    snakemake.params.runtime["config"],
    # The workflow's checkout, for provenance (Snakemake sets __file__ to the script's path).
    workflow_dir=Path(__file__).resolve().parents[2],
)
