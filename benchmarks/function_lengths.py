"""Count the functions longer than a number of formatted lines, and the formatter's skip
markers.

    .venv/bin/python benchmarks/function_lengths.py [--over 60] [--list]

Reads src/ and workflow/ with the ast module (a function's lines run from its ``def`` to
its last line, docstring included), and every Python file of the checkout for markers.
tests/test_style.py holds both counts at their pinned maxima.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MARKER = "fmt: " + "skip"  # split, so this file holds no marker


def long_functions(roots: list[Path], over: int) -> list[tuple[int, str]]:
    """(lines, "path:line name") of every function longer than ``over`` lines, longest first."""
    rows = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > over:
                        where = f"{path.relative_to(REPO)}:{node.lineno} {node.name}"
                        rows.append((lines, where))
    return sorted(rows, reverse=True)


def skip_markers(root: Path) -> int:
    """How many lines of the checkout's Python files carry the formatter's skip marker."""
    return sum(
        line.count(MARKER)
        for path in root.rglob("*.py")
        if ".venv" not in path.parts and ".snakemake" not in path.parts
        for line in path.read_text(encoding="utf-8").splitlines()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--over", type=int, default=60)
    parser.add_argument("--list", action="store_true")
    args = parser.parse_args()
    rows = long_functions([REPO / "src", REPO / "workflow"], args.over)
    print(f"functions over {args.over} lines in src/ and workflow/: {len(rows)}")
    folders = ("src", "tests", "workflow", "benchmarks", "examples")
    print(f"skip markers in {', '.join(folders)}: {sum(skip_markers(REPO / f) for f in folders)}")
    if args.list:
        for lines, where in rows:
            print(f"{lines:5d}  {where}")


if __name__ == "__main__":
    main()
