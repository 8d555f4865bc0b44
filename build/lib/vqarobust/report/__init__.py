"""Figures and the HTML report, rendered from the DuckDB results file."""

from vqarobust.report.html import render_report

__all__ = ["render_report"]
