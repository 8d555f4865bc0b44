"""Snakemake adapter: render the HTML report from the DuckDB results file."""

from vqarobust.logs import setup_logging
from vqarobust.report import render_report

setup_logging(snakemake.log[0])
render_report(snakemake.input[0], snakemake.output.html)
