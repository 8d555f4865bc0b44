"""The report's sections in page order: each one module with one ``SECTION``
(:class:`vqarobust.report.sections.base.Section`), each shown by the block of the same
name in ``templates/report.html.j2`` through its partial ``templates/sections/<name>.html.j2``.
A new section is a module here, its partial, an entry below and a block in the page
(docs/architecture.md)."""

from __future__ import annotations

from vqarobust.report.sections import (
    attention,
    calibration,
    context,
    costs,
    failures,
    figures,
    plugins,
    provenance,
    questions,
    settings,
    summary,
    tables,
    uncertainty,
    warnings,
)
from vqarobust.report.sections.base import Run, Section

SECTIONS: tuple[Section, ...] = tuple(
    m.SECTION
    for m in (
        summary,
        settings,
        figures,
        calibration,
        attention,
        uncertainty,
        questions,
        context,
        failures,
        tables,
        plugins,
        costs,
        warnings,
        provenance,
    )
)

__all__ = ["SECTIONS", "Run", "Section"]
