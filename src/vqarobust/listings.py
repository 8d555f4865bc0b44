"""What each registry holds and where each name comes from (the package or a plugin):
the rows of ``vqarobust corruptions``, ``text-perturbations``, ``rankers``, ``families``
and ``analyses``."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from vqarobust import plugins

Row = dict[str, str]


def corruption_rows(family: str | None = None) -> list[Row]:
    """Each corruption (of one class, with ``family``): class, severities, benchmark
    membership, what it needs beyond the image, where it comes from."""
    from vqarobust import corruptions

    out = []
    for name in corruptions.names(family=family):
        entry = corruptions.CORRUPTIONS.entry(name)
        out.append(
            {
                "name": name,
                "class": entry.tags["family"],
                "severities": f"1..{corruptions.max_severity(name)}",
                "benchmark": "yes" if entry.tags.get("benchmark") else "",
                "needs": corruptions.needs(name) or "",
                "from": plugins.describe(entry.origin),
            }
        )
    return out


def text_rows() -> list[Row]:
    """Each text perturbation: its level (char, word, sentence), what it needs, origin."""
    from vqarobust.text.registry import TEXT_PERTURBATIONS

    return [
        {
            "name": name,
            "level": str(e.tags.get("level", "")),
            "needs": str(e.tags.get("needs") or ""),
            "from": plugins.describe(e.origin),
        }
        for name in TEXT_PERTURBATIONS.list()
        for e in [TEXT_PERTURBATIONS.entry(name)]
    ]


def ranker_rows() -> list[Row]:
    """Each basic-question ranker (one perturbation per basic-question dataset)."""
    from vqarobust.text.ranking import BQ_RANKERS

    return [
        {
            "name": name,
            "ranker": str(e.tags.get("ranker", "")),
            "needs": str(e.tags.get("needs") or ""),
            "from": plugins.describe(e.origin),
        }
        for name in BQ_RANKERS.list()
        for e in [BQ_RANKERS.entry(name)]
    ]


def family_rows() -> list[Row]:
    """Each model family: whether it generates its answers, exposes attention, its
    default batch size, where it comes from."""
    from vqarobust.models import FAMILIES, GENERATIVE_FAMILIES, default_batch_size

    def attention(tag: object) -> str:
        return "yes" if tag is True else str(tag or "")  # "vilt": a ViLT classifier only

    return [
        {
            "name": name,
            "generative": "yes" if name in GENERATIVE_FAMILIES else "",
            "attention": attention(e.tags.get("attention")),
            "batch_size": str(default_batch_size(name)),
            "from": plugins.describe(e.origin),
        }
        for name in FAMILIES.list()
        for e in [FAMILIES.entry(name)]
    ]


def analysis_rows() -> list[Row]:
    """Each analysis in registry order: the tables it writes (not the private ones), the
    analyses it reads, where it comes from."""
    from vqarobust.analyses.registry import ANALYSES

    return [
        {
            "name": a.name,
            "tables": ", ".join(a.tables),
            "requires": ", ".join(a.requires),
            "from": plugins.describe(a.module),
        }
        for a in ANALYSES.values()
    ]


LISTINGS: dict[str, Callable[[], list[Row]]] = {
    "text-perturbations": text_rows,
    "rankers": ranker_rows,
    "families": family_rows,
    "analyses": analysis_rows,
}


def format_rows(rows: Sequence[Row], columns: Sequence[str]) -> str:
    """A plain-text table: a header, then one line per row, columns padded to fit."""
    widths = [max([len(c), *(len(r[c]) for r in rows)]) for c in columns]
    lines = [[c for c in columns], *([r[c] for c in columns] for r in rows)]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip()
        for line in lines
    )
