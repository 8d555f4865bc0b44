"""Figures and the HTML report, rendered from the DuckDB results file.

``render_report`` is imported on first use: the Snakefile reads ``report.outputs`` at
every start, and that must not load matplotlib and DuckDB.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_report"]


def __getattr__(name: str) -> Any:
    if name == "render_report":
        from vqarobust.report.html import render_report

        return render_report
    raise AttributeError(f"module 'vqarobust.report' has no attribute {name!r}")
