"""Digests of the package code a computation runs, read from the source files on disk.

An analysis (``vqarobust.analyses``) and a model family's inference
(:func:`vqarobust.models.family_code_digest`) record the SHA-256 of the files their
module imports, transitively, so that an edit to any of them reruns their jobs (a
Snakemake param) and invalidates their cached results (a fingerprint key); an edit
elsewhere in the package does neither. Imports are read from the source (``ast``), never
executed.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
from collections.abc import Iterator
from pathlib import Path


def _module_names(node: ast.AST, package: str, here: str = "") -> set[str]:
    """The ``package`` modules one import statement names; a relative import resolves
    against ``here``, the package of the importing module (a plugin's ``from .x``)."""
    if isinstance(node, ast.Import):
        return {a.name for a in node.names if a.name.split(".")[0] == package}
    if not isinstance(node, ast.ImportFrom):
        return set()
    module = node.module or ""
    if node.level:
        parts = here.split(".") if here else []
        if node.level - 1 >= len(parts):
            return set()  # beyond the top package: not importable
        anchor = ".".join(parts[: len(parts) - (node.level - 1)])
        module = f"{anchor}.{module}" if module else anchor
    if not module or module.split(".")[0] != package:
        return set()
    # ``from vqarobust.metrics import intervals`` imports a module too.
    return {module, *(f"{module}.{a.name}" for a in node.names)}


def _statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement in ``body`` and in the blocks nested in it (functions, classes,
    branches, loops, handlers, cases); expressions are never visited (they hold no
    import statement), which makes this many times faster than ``ast.walk``."""
    for stmt in body:
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            yield from _statements(getattr(stmt, name, []))
        for block in (*getattr(stmt, "handlers", []), *getattr(stmt, "cases", [])):
            yield from _statements(block.body)


@functools.lru_cache(maxsize=4096)
def _read(
    path: str, mtime_ns: int, size: int, package: str, here: str = ""
) -> tuple[frozenset[str], bytes]:
    # Keyed by the file's stat: an edited file is read again, an unchanged one once per
    # process (the Snakefile digests every analysis at each parse).
    data = Path(path).read_bytes()
    body = ast.parse(data).body
    # A package's __init__ counts at its top level only: its function-level imports are
    # lazy loaders of its members (e.g. the model families' factories), followed only
    # where an analysis imports that member itself.
    nodes = body if Path(path).name == "__init__.py" else _statements(body)
    return frozenset(name for node in nodes for name in _module_names(node, package, here)), data


def _file(path: Path, package: str, here: str = "") -> tuple[frozenset[str], bytes]:
    """The ``package`` modules a source file imports (relative ones against ``here``,
    the package it belongs to), and its bytes."""
    stat = path.stat()
    return _read(str(path), stat.st_mtime_ns, stat.st_size, package, here)


def imports_of(path: Path, package: str) -> frozenset[str]:
    """The ``package`` modules (and names) a source file imports by absolute import."""
    return _file(path, package)[0]


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _source(module: str, root: Path) -> Path | None:
    """The file of ``module`` under its top package's folder ``root``, found on disk:
    no import (importing a module to find it would run its package's imports)."""
    parts = module.split(".")[1:]
    candidates = [root.joinpath(*parts, "__init__.py")]
    if parts:
        candidates.append(root.joinpath(*parts).with_suffix(".py"))
    return next((path for path in candidates if path.is_file()), None)


def module_files(module: str) -> list[Path]:
    """The source files of ``module`` and of every package module it imports,
    transitively (parent packages' ``__init__`` included: importing runs them)."""
    package = module.split(".")[0]
    root = _package_dir(package)
    if root is None:
        raise ModuleNotFoundError(f"no package {package!r}")
    seen: dict[str, Path | None] = {}  # None: a name that is no module (a function, ...)
    todo = [module]
    while todo:
        name = todo.pop()
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            prefix = ".".join(parts[:i])
            if prefix in seen:
                continue
            path = seen[prefix] = _source(prefix, root)
            if path is None:
                continue
            here = prefix if path.name == "__init__.py" else prefix.rpartition(".")[0]
            todo.extend(_file(path, package, here)[0])
    return sorted({path for path in seen.values() if path is not None})


def code_digest(module: str) -> str:
    """SHA-256 over the package files ``module`` runs (:func:`module_files`), each by
    its path inside the package and its content: an edit to any of them changes it."""
    files = module_files(module)
    package = module.split(".")[0]
    root = _package_dir(package)
    assert root is not None  # module_files found it
    h = hashlib.sha256()
    for path in files:
        h.update(str(path.relative_to(root.parent)).encode() + b"\0")
        h.update(_file(path, package)[1] + b"\0")
    return h.hexdigest()


def file_digest(module: str) -> str:
    """SHA-256 of ``module``'s own source file (its path inside the package and its
    content), without the modules it imports."""
    package = module.split(".")[0]
    root = _package_dir(package)
    path = None if root is None else _source(module, root)
    if path is None:
        raise ModuleNotFoundError(f"no source file of module {module!r}")
    h = hashlib.sha256(str(path.relative_to(root.parent)).encode() + b"\0")
    h.update(_file(path, package)[1] + b"\0")
    return h.hexdigest()
