"""The "Warnings" section: the sentences the analyses left in ``run_info.warnings``
(degenerate metric inputs, dropped gaps, skips)."""

from __future__ import annotations

import json

from vqarobust.report.sections.base import Data, Run, Section


def context(data: Data, run: Run) -> list[str]:
    """Every warning, in the order the analyses recorded them."""
    del data
    return json.loads(run.info.get("warnings", "[]"))


SECTION = Section("warnings", (), context)
