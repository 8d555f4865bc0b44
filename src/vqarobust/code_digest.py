"""Digests of the package code a computation runs, read from the source files on disk.

The one rerun rule (docs/architecture.md): every job that runs package code records the
SHA-256 of the modules its script imports, transitively (a Snakemake param, and a key of
its cached results), so that an edit to any of them reruns the job and an edit elsewhere
in the package does not. Imports are read from the source (``ast``), never executed.

Each file counts by its syntax tree without docstrings (comments and layout are not in
the tree): reformatting, commenting or documenting code reruns nothing. A perturbation
registered by decorator (a corruption, a text perturbation, a ranker, a context swap) is
taken out of its module's digest and counts only for the jobs that apply it
(:func:`entry_digest`): editing ``snow`` reruns the snow subsets, not ``fog`` and not the
jobs that merely import the registry.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.util
import json
import logging
import os
import secrets
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vqarobust.user_cache import cache_root

log = logging.getLogger(__name__)


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


# The perturbation registries whose decorated members count per job (entry_digest).
ENTRY_REGISTRIES = frozenset(
    {"PERTURBATIONS", "CORRUPTIONS", "TEXT_PERTURBATIONS", "BQ_RANKERS", "CONTEXT"}
)
_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def _without_docstrings(tree: ast.AST) -> ast.AST:
    """``tree`` with the docstring of the module and of every function and class left
    out (an empty body keeps a ``pass`` so that the tree stays valid)."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Module | _Definition):
            continue
        body = node.body
        first = body[0].value if body and isinstance(body[0], ast.Expr) else None
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            node.body = body[1:] or [ast.Pass()]
    return tree


def _entry_name(node: ast.stmt) -> str | None:
    """The name of a top-level definition registered by a decorator of one of the
    :data:`ENTRY_REGISTRIES`, or None. Its own name, not the registered one: a function
    may be registered under several names (a ranker's yes/no twin) and looked up by any
    (:func:`vqarobust.plan.code.perturbation_digest` asks by the object's ``__name__``)."""
    if not isinstance(node, _Definition):
        return None
    for decorator in node.decorator_list:
        call = decorator if isinstance(decorator, ast.Call) else None
        target = call.func if call else decorator
        if not (isinstance(target, ast.Attribute) and target.attr == "register"):
            continue
        owner = target.value
        if not (isinstance(owner, ast.Name) and owner.id in ENTRY_REGISTRIES):
            continue
        return node.name
    return None


def _names_used(node: ast.AST) -> frozenset[str]:
    return frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name))


def _from_imports(body: list[ast.stmt], package: str, here: str) -> frozenset[tuple[str, str]]:
    """(module, name) of every ``from <package module> import name`` in ``body``."""
    found = set()
    for node in _statements(body):
        if isinstance(node, ast.ImportFrom):
            for module in _module_names(node, package, here):
                found.update((module, a.name) for a in node.names)
    return frozenset(found)


@dataclass(frozen=True)
class Source:
    """What the digests read of one file: the package modules it imports, its syntax tree
    without docstrings or registered entries (``code``), and each entry's own tree."""

    imports: frozenset[str]
    code: bytes
    entries: dict[str, bytes]
    # What each entry's body names (an entry that calls another counts both), and the
    # (module, name) pairs the file imports by name (a registered entry used elsewhere).
    entry_names: dict[str, frozenset[str]]
    imported: frozenset[tuple[str, str]]


@functools.lru_cache(maxsize=4096)
def _read(path: str, mtime_ns: int, size: int, package: str, here: str = "") -> Source:
    # Keyed by the file's stat: an edited file is read again, an unchanged one once per
    # process (the Snakefile digests every job kind at each parse). Across processes the
    # parse is kept on disk under the SHA-256 of the file's bytes (_parse_cached).
    return _parse_cached(Path(path).read_bytes(), Path(path).name == "__init__.py", package, here)


def _parse(data: bytes, is_init: bool, package: str, here: str) -> Source:
    tree = ast.parse(data)
    body = tree.body
    # A package's __init__ counts at its top level only: its function-level imports are
    # lazy loaders of its members (e.g. the model families' factories), followed only
    # where an analysis imports that member itself.
    nodes = body if is_init else _statements(body)
    imports = frozenset(name for node in nodes for name in _module_names(node, package, here))
    imported = _from_imports(body, package, here)
    _without_docstrings(tree)
    entries, uses = {}, {}
    for node in list(tree.body):
        name = _entry_name(node)
        if name is not None:
            entries[name] = ast.dump(node).encode()
            uses[name] = _names_used(node)
            tree.body.remove(node)
    return Source(imports, ast.dump(tree).encode(), entries, uses, imported)


@functools.cache
def _parser_identity() -> bytes:
    """What a parse depends on besides the file: the Python version (its ``ast``) and the
    source of this module, which defines the parse and how it is stored."""
    return f"{sys.implementation.name} {sys.version}\0".encode() + Path(__file__).read_bytes()


def _cache_file(data: bytes, is_init: bool, package: str, here: str) -> Path:
    h = hashlib.sha256(_parser_identity())
    for part in (data, str(is_init).encode(), package.encode(), here.encode()):
        h.update(b"\0" + part)
    return cache_root() / "code-digest" / f"{h.hexdigest()}.json.z"


def _strings(value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"not a list of strings: {value!r:.80}")
    return value


def _source_of(record: Any) -> Source:
    """The :class:`Source` a cache entry holds, its every field checked: an entry that
    is not exactly what :func:`_record_of` writes is refused (ValueError)."""
    if not isinstance(record, dict) or set(record) != set(Source.__dataclass_fields__):
        raise ValueError("not a kept parse")
    entries, names = record["entries"], record["entry_names"]
    if not isinstance(record["code"], str) or not isinstance(entries, dict):
        raise ValueError("not a kept parse")
    if not isinstance(names, dict) or not all(isinstance(v, str) for v in entries.values()):
        raise ValueError("not a kept parse")
    imported = [_strings(pair) for pair in record["imported"]]
    if any(len(pair) != 2 for pair in imported):
        raise ValueError("not a kept parse")
    return Source(
        frozenset(_strings(record["imports"])),
        record["code"].encode(),
        {k: v.encode() for k, v in entries.items()},
        {k: frozenset(_strings(v)) for k, v in names.items()},
        frozenset((m, n) for m, n in imported),
    )


def _record_of(source: Source) -> dict[str, Any]:
    return {
        "imports": sorted(source.imports),
        "code": source.code.decode(),
        "entries": {k: v.decode() for k, v in source.entries.items()},
        "entry_names": {k: sorted(v) for k, v in source.entry_names.items()},
        "imported": sorted(source.imported),
    }


def _parse_cached(data: bytes, is_init: bool, package: str, here: str) -> Source:
    """:func:`_parse`, kept on disk: every Snakemake start and every job that digests
    code parses the same ~350 files, about 1.5 s of CPU each time. The cache is keyed by
    content (:func:`_cache_file`), so an entry is never stale; an entry that cannot be
    read back whole is parsed again, and a cache that cannot be found or written costs
    only the parse."""
    try:
        path = _cache_file(data, is_init, package, here)
    except (RuntimeError, OSError) as error:
        # No home folder and no variable naming a cache (a container's nameless user).
        log.debug("code digest cache: none (%s)", error)
        return _parse(data, is_init, package, here)
    try:
        return _source_of(json.loads(zlib.decompress(path.read_bytes())))
    except FileNotFoundError:
        pass
    except Exception as error:  # a cut, foreign or unreadable entry: parse again
        log.debug("code digest cache: %s unreadable (%s), parsing again", path, error)
    source = _parse(data, is_init, package, here)
    written = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Written whole under another name, then renamed: a reader never sees half of it.
        # Created as any file (the umask's mode), so that a cache folder shared by a
        # group serves its members, where a temporary file's 0600 would not.
        written = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
        fd = os.open(written, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as fh:
            fh.write(zlib.compress(json.dumps(_record_of(source)).encode(), 1))
        os.replace(written, path)
        written = None
    except OSError as error:
        log.debug("code digest cache: cannot write %s (%s)", path, error)
    finally:
        if written is not None:  # not renamed: an error, or the process interrupted
            Path(written).unlink(missing_ok=True)
    return source


def _entry_closure(source: Source, name: str) -> list[str]:
    """``name`` and the entries of the same file its body calls, transitively, sorted."""
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen or current not in source.entries:
            continue
        seen.add(current)
        todo.extend(source.entry_names[current] & source.entries.keys())
    return sorted(seen)


def _file(path: Path, package: str, here: str = "") -> Source:
    """What the digests read of a source file (relative imports against ``here``, the
    package it belongs to)."""
    stat = path.stat()
    return _read(str(path), stat.st_mtime_ns, stat.st_size, package, here)


def imports_of(path: Path, package: str) -> frozenset[str]:
    """The ``package`` modules (and names) a source file imports by absolute import."""
    return _file(path, package).imports


def _package_dir(package: str) -> Path | None:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _source(module: str, root: Path) -> Path | None:
    """The file of ``module`` under its top package's folder ``root``, found on disk:
    no import (importing a module to find it would run its package's imports)."""
    return _find_source(module, str(root))


@functools.lru_cache(maxsize=16384)
def _find_source(module: str, root_dir: str) -> Path | None:
    # Cached per process: a plan digests every job, each walking the same modules (a
    # module file added or removed while the workflow parses is not seen).
    root = Path(root_dir)
    parts = module.split(".")[1:]
    candidates = [root.joinpath(*parts, "__init__.py")]
    if parts:
        candidates.append(root.joinpath(*parts).with_suffix(".py"))
    return next((path for path in candidates if path.is_file()), None)


def module_path(module: str) -> Path | None:
    """The source file of a package module, None for a name that is no module."""
    root = _package_dir(module.split(".")[0])
    return None if root is None else _source(module, root)


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
            todo.extend(_file(path, package, here).imports)
    return sorted({path for path in seen.values() if path is not None})


def _stat_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = path.stat()
    except OSError:
        return None
    return stat.st_mtime_ns, stat.st_size


# code_digest's answers, each with the stat of every file it read: a plan asks for the
# same digests at every job, and an answer stays valid while none of its files changed.
_DIGESTS: dict[tuple[str, ...], tuple[str, dict[Path, tuple[int, int] | None]]] = {}


def code_digest(*modules: str) -> str:
    """SHA-256 over the package files ``modules`` run (:func:`module_files`), each by
    its path inside the package and its code (:class:`Source`): an edit to the code of
    any of them changes it; a docstring, a comment or a registered entry does not."""
    package = modules[0].split(".")[0]
    root = _package_dir(package)
    cached = _DIGESTS.get((str(root), *modules))
    if cached is not None and all(_stat_key(p) == k for p, k in cached[1].items()):
        return cached[0]
    files = sorted({path for module in modules for path in module_files(module)})
    assert root is not None  # module_files found it
    read = set(files)
    h = hashlib.sha256()
    for path in files:
        source = _file(path, package)
        h.update(str(path.relative_to(root.parent)).encode() + b"\0")
        h.update(source.code + b"\0")
        # A registered entry that this file imports by name is code it runs.
        for module, name in sorted(source.imported):
            found = _source(module, root)
            if found is not None:
                read.add(found)
                entries = _file(found, package)
                for used in _entry_closure(entries, name):
                    h.update(f"{module}.{used}".encode() + b"\0" + entries.entries[used])
    digest = h.hexdigest()
    _DIGESTS[(str(root), *modules)] = digest, {path: _stat_key(path) for path in read}
    return digest


def entry_digest(module: str, name: str) -> str:
    """SHA-256 of one registered entry (a corruption, text perturbation, ranker or
    context swap, :data:`ENTRY_REGISTRIES`), by the name of its function: its own
    definition and those of the entries of its file it calls, with the code digest of
    the module that defines it. An entry registered otherwise (e.g. a ranker made by a
    factory) is part of its module's code, so the module's digest alone covers it."""
    package = module.split(".")[0]
    root = _package_dir(package)
    path = None if root is None else _source(module, root)
    if path is None:
        raise ModuleNotFoundError(f"no source file of module {module!r}")
    source = _file(path, package)
    h = hashlib.sha256(code_digest(module).encode())
    for used in _entry_closure(source, name):
        h.update(b"\0" + used.encode() + b"\0" + source.entries[used])
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
    h.update(_file(path, package).code + b"\0")
    return h.hexdigest()
