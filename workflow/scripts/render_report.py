"""Snakemake adapter: render the HTML report from the DuckDB results file."""

import gc

gc.disable()  # for the imports, whose objects start_job freezes
from vqarobust.jobs import start_job
from vqarobust.report.html import render_report

start_job(snakemake.log[0])
render_report(snakemake.input[0], snakemake.output.html)
