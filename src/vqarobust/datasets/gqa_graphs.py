"""GQA's scene graphs and the objects a question's reasoning selects.

A balanced-questions entry names the objects it is about in two places: its ``semantic``
program (each step's ``argument``, e.g. ``"table (722318)"`` or ``"shirt (2345,2346)"``;
``"(-)"`` for none) and its ``annotations`` (``question``, ``answer``, ``fullAnswer``:
token spans -> object ids, several ids comma-separated). Those objects are *relevant*;
the SwapMix paper swaps the others (the context). A scene graph (``sceneGraphs`` JSON)
gives each object's ``name``, ``attributes`` and box (``x``, ``y``, ``w``, ``h``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_IDS = re.compile(r"\(([^()]*)\)")


def _ids(text: str) -> set[str]:
    return {t.strip() for t in text.split(",") if t.strip() and t.strip() != "-"}


def relevant_objects(entry: Mapping[str, Any]) -> set[str]:
    """The object ids a GQA question's reasoning steps and annotations select."""
    out: set[str] = set()
    for step in entry.get("semantic") or ():
        for group in _IDS.findall(str(step.get("argument", ""))):
            out |= _ids(group)
    for spans in (entry.get("annotations") or {}).values():
        for value in (spans or {}).values():
            out |= _ids(str(value))
    return out


_WORD = re.compile(r"[a-z0-9]+")


def said_phrases(question: str, longest: int = 4) -> set[str]:
    """Every run of one to ``longest`` lower-case words of a question, the last word also
    without a plural -s or -es ("Are there birds?" says "bird")."""
    words = _WORD.findall(question.lower())
    said: set[str] = set()
    for n in range(1, longest + 1):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            said.add(" ".join(gram))
            for suffix in ("es", "s"):
                if gram[-1].endswith(suffix) and len(gram[-1]) > len(suffix) + 1:
                    said.add(" ".join([*gram[:-1], gram[-1][: -len(suffix)]]))
    return said


def name_index(names: Iterable[str]) -> dict[str, list[str]]:
    """Names by their lower-case words (how :func:`said_phrases` spells them)."""
    index: dict[str, list[str]] = {}
    for name in names:
        index.setdefault(" ".join(_WORD.findall(name.lower())), []).append(name)
    return index


def mentioned_names(question: str, names: Iterable[str] | Mapping[str, list[str]]) -> set[str]:
    """The names a question says as whole words (:func:`said_phrases`); ``names`` may be
    a :func:`name_index` made once for many questions."""
    index = names if isinstance(names, Mapping) else name_index(names)
    return {n for phrase in said_phrases(question) for n in index.get(phrase, ())}


@dataclass(frozen=True)
class GraphObject:
    """One scene-graph object: id, class name, attributes, box (x0, y0, x1, y1) pixels."""

    id: str
    name: str
    attributes: tuple[str, ...]
    box: tuple[float, float, float, float]


def graph_objects(graph: Mapping[str, Any]) -> list[GraphObject]:
    """The objects of one image's scene graph, by id."""
    out = []
    for oid, o in sorted((graph.get("objects") or {}).items()):
        x, y, w, h = (float(o[k]) for k in ("x", "y", "w", "h"))
        out.append(
            GraphObject(
                str(oid), str(o["name"]), tuple(o.get("attributes") or ()), (x, y, x + w, y + h)
            )
        )
    return out
