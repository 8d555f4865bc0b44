"""What each registry holds and where each name comes from (the package or a plugin):
the rows of ``vqarobust corruptions``, ``text-perturbations``, ``rankers``, ``families``
and ``analyses``."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path

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
                "family": entry.tags["family"],
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
    from vqarobust.models import FAMILIES, default_batch_size, generative_families

    def attention(tag: object) -> str:
        return "yes" if tag is True else str(tag or "")  # "vilt": a ViLT classifier only

    return [
        {
            "name": name,
            "generative": "yes" if name in generative_families() else "",
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


# The README's perturbation and model-family tables are these listings grouped, written
# between these markers by ``python -m vqarobust.listings README.md`` (tests/test_readme.py
# holds the README equal to them, so a new registry entry cannot be missing there).
README_MARKERS = ("<!-- listings:begin -->", "<!-- listings:end -->")


def _short_needs(needs: str) -> str:
    """A ``needs`` text without its parenthesised details and trailing doc pointer."""
    return re.sub(r"\s*\([^()]*\)", "", needs).split(";")[0].strip()


def _cell(name: str, *, bold: bool = False, notes: Sequence[str] = ()) -> str:
    """One perturbation in a table cell: its name, bold when in the benchmark, with notes."""
    text = f"**`{name}`**" if bold else f"`{name}`"
    return text + "".join(f" ({note})" for note in notes if note)


def _notes(row: Row) -> tuple[str, ...]:
    """What a listing row's cell adds to its name: one level only, what it needs."""
    one_level = "1 level" if row.get("severities") == "1..1" else ""
    return one_level, f"needs {_short_needs(row['needs'])}" if row["needs"] else ""


def _prefix(row: Row) -> str:
    """A ranker's basic-question dataset: ``bq`` (general) or ``ynbq`` (yes/no)."""
    return row["name"].split("_")[0]


def _grouped(rows: Sequence[Row], key: Callable[[Row], str]) -> dict[str, list[Row]]:
    """``rows`` grouped by ``key``, groups in sorted order, rows in listing order."""
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(key(row), []).append(row)
    return dict(sorted(groups.items()))


def _built_in(rows: Sequence[Row]) -> list[Row]:
    # A plugin installed where the README is generated must not reach the README.
    return [r for r in rows if r["from"] == "built-in"]


def perturbation_table() -> str:
    """The built-in image and question perturbations as a Markdown table, one row per
    family (``vqarobust corruptions``' class, ``text-perturbations``' level, a ranker
    prefix)."""
    lines = ["| side | family | perturbations |", "|---|---|---|"]
    for family, rows in _grouped(_built_in(corruption_rows()), lambda r: r["family"]).items():
        cells = [_cell(r["name"], bold=r["benchmark"] == "yes", notes=_notes(r)) for r in rows]
        lines.append(f"| image | {family} | {', '.join(cells)} |")
    for level, rows in _grouped(_built_in(text_rows()), lambda r: r["level"]).items():
        cells = [_cell(r["name"], notes=_notes(r)) for r in rows]
        lines.append(f"| question | {level} level | {', '.join(cells)} |")
    for group, rows in _grouped(_built_in(ranker_rows()), _prefix).items():
        cells = [_cell(r["name"], notes=_notes(r)) for r in rows]
        lines.append(f"| question | basic questions `{group}_*` | {', '.join(cells)} |")
    return "\n".join(lines) + "\n"


def family_table() -> str:
    """The built-in model families (``vqarobust families``) as a Markdown table, with the
    model repository's entries of each."""
    from vqarobust.models.repository import read_repository

    entries: dict[str, list[str]] = {}
    for name, entry in read_repository().items():
        entries.setdefault(str(entry.get("family")), []).append(f"`{name}`")
    header = (
        "| family | generates its answers | attention maps | default batch size "
        "| model repository entries |"
    )
    lines = [header, "|---|---|---|---|---|"]
    for r in _built_in(family_rows()):
        attention = {"yes": "yes", "": "no"}.get(r["attention"], f"{r['attention']} only")
        named = ", ".join(entries.get(r["name"], [])) or "-"
        cells = [f"`{r['name']}`", r["generative"] or "no", attention, r["batch_size"], named]
        lines.append(f"| {' | '.join(cells)} |")
    return "\n".join(lines) + "\n"


def readme_tables() -> str:
    """What the README holds between :data:`README_MARKERS`."""
    return (
        "<!-- generated by `python -m vqarobust.listings README.md`; do not edit by hand -->\n"
        f"{perturbation_table()}\n{family_table()}"
    )


def update_readme(path: str | Path) -> bool:
    """Write :func:`readme_tables` between the markers of ``path``; True if it changed."""
    text = Path(path).read_text(encoding="utf-8")
    start, end = (text.index(m) for m in README_MARKERS)
    new = text[: start + len(README_MARKERS[0])] + "\n" + readme_tables() + text[end:]
    Path(path).write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    # python -m vqarobust.listings [README.md]: print the tables, or update the README.
    import sys

    if len(sys.argv) > 1:
        print("updated" if update_readme(sys.argv[1]) else "current")
    else:
        print(readme_tables(), end="")
