"""Count the names one rule file defines at its top level and another rule file uses.

Snakemake runs every included file in one namespace, so a function or variable defined
in one ``.smk`` file and read in another is a hidden dependency between them: a reader of
the second file cannot see where the name comes from, and nothing can test it without
building a DAG. The study plan (``vqarobust.plan``) is meant to hold what the rule files
share; this script measures how much is still shared through the namespace.

Each file is translated to Python by Snakemake's own parser, so that rule bodies count as
uses; a name counts once, whatever the number of files that use it.

    python benchmarks/shared_rule_names.py            # the count and the names
    python benchmarks/shared_rule_names.py --max 15   # exit 1 above 15
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

import snakemake.api  # noqa: F401  (snakemake.parser imports the workflow module through it)
from snakemake.parser import parse

ROOT = Path(__file__).resolve().parent.parent


def rule_files(root: Path = ROOT) -> list[Path]:
    return [root / "Snakefile", *sorted((root / "rules").glob("*.smk"))]


class _Source:
    """What Snakemake's parser asks of a source file and of the workflow's source cache:
    a path to print and a file to read (nothing here is run)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sourcecache = self

    def get_path_or_uri(self, secret_free: bool = True) -> str:
        return str(self.path)

    def open(self, source: _Source):
        return source.path.open(encoding="utf-8")


def _python(path: Path) -> ast.Module:
    source = _Source(path)
    return ast.parse(parse(source, source, {})[0])


def top_level_definitions(tree: ast.Module) -> set[str]:
    """Functions, classes and assigned names at the file's top level (imports left out:
    every file imports what it uses)."""
    names: set[str] = set()
    # A top-level try or if block still defines at the top level.
    nodes = list(tree.body)
    for node in nodes:
        if isinstance(node, ast.Try | ast.If):
            nodes += [*node.body, *node.orelse, *getattr(node, "finalbody", [])]
            nodes += [s for h in getattr(node, "handlers", []) for s in h.body]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
    return names


def used_names(tree: ast.Module) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def shared_names(root: Path = ROOT) -> dict[str, tuple[str, list[str]]]:
    """Each shared name: the file that defines it and the other files that use it."""
    trees = {path.relative_to(root).as_posix(): _python(path) for path in rule_files(root)}
    defined = {name: top_level_definitions(tree) for name, tree in trees.items()}
    used = {name: used_names(tree) for name, tree in trees.items()}
    shared: dict[str, tuple[str, list[str]]] = {}
    for where, names in defined.items():
        for name in sorted(names):
            users = sorted(f for f in trees if f != where and name in used[f])
            if users:
                shared[name] = (where, users)
    return shared


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max", type=int, default=None, help="fail above this count")
    args = parser.parse_args(argv)
    shared = shared_names()
    for name, (where, users) in sorted(shared.items(), key=lambda kv: (kv[1][0], kv[0])):
        print(f"{name:32} {where:28} -> {', '.join(users)}")
    print(f"{len(shared)} names defined at the top level of one rule file and used in another")
    return 1 if args.max is not None and len(shared) > args.max else 0


if __name__ == "__main__":
    sys.exit(main())
