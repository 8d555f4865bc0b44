"""Plugins: corruptions, text perturbations, model families and analyses from code
outside the package (docs/extending.md).

Two ways in, both modules whose import registers through the registries' own
decorators, as the built-ins do:

* an installed distribution declares entry points in the groups of :data:`GROUPS`
  (each entry point's value is a module, ``package.module``), read with
  :mod:`importlib.metadata`;
* the config's ``plugins:`` lists modules importable from the working directory (a
  study's ``workflow/plugins/`` folder, not installed).

The Snakefile loads them before it validates the config (which checks corruption names
and model families against the registries) and exports the config's modules to its jobs
in :data:`ENV`; each job that looks a name up loads them again in its own process
(:func:`load` with no argument). A plugin that fails to import, or registers a name the
package or another plugin has, is a :class:`PluginError` naming the plugin, its package
and the cause. :func:`source_digest` hashes a plugin module's files: the workflow puts it
in the params of exactly the jobs that run that module's code.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from vqarobust.registry import RegistryClash

# Entry-point group -> the kind of thing its modules register.
GROUPS = {
    "vqarobust.corruptions": "corruption",
    "vqarobust.text_perturbations": "text perturbation",
    "vqarobust.model_families": "model family",
    "vqarobust.analyses": "analysis",
}
ENV = "VQAROBUST_PLUGINS"  # the config's plugin modules, comma-separated, for the jobs


class PluginError(Exception):
    """A plugin that cannot be loaded: one line naming it, its package and the cause."""


@dataclass(frozen=True)
class Plugin:
    """One plugin module and where it was declared."""

    name: str  # the entry point's name, or the module for a config plugin
    module: str
    package: str | None = None  # the distribution declaring it; None: the config's
    version: str | None = None
    group: str | None = None

    def describe(self) -> str:
        """``plugin NAME (package P VERSION)`` or ``plugin module M (config plugins)``."""
        if self.package is None:
            return f"plugin module {self.module} (config plugins)"
        return f"plugin {self.name} (package {self.package} {self.version})"


def _entry_point_plugins() -> list[Plugin]:
    found = importlib.metadata.entry_points()
    out = []
    for group in GROUPS:
        for ep in sorted(found.select(group=group), key=lambda e: (e.name, e.value)):
            dist = ep.dist
            out.append(
                Plugin(
                    ep.name,
                    ep.value.split(":")[0].strip(),
                    dist.name if dist else "unknown",
                    dist.version if dist else "unknown",
                    group,
                )
            )
    return out


def discover(modules: Sequence[str] = ()) -> list[Plugin]:
    """The installed entry-point plugins, then the config's ``modules``, each module once."""
    out: dict[str, Plugin] = {}
    for plugin in [*_entry_point_plugins(), *(Plugin(m, m) for m in modules)]:
        out.setdefault(plugin.module, plugin)
    return list(out.values())


_LOADED: dict[str, Plugin] = {}  # module -> plugin: what this process has imported


def configured() -> list[str]:
    """The config's plugin modules as the Snakefile exported them (:data:`ENV`)."""
    return [m for m in os.environ.get(ENV, "").split(",") if m]


def load(modules: Sequence[str] | None = None) -> list[Plugin]:
    """Import every plugin (entry points and ``modules``; None: :func:`configured`) not
    imported yet in this process; return every plugin loaded so far. A config module
    is imported with the working directory on ``sys.path``."""
    modules = configured() if modules is None else list(modules)
    if modules and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for plugin in discover(modules):
        if plugin.module in _LOADED:
            continue
        try:
            importlib.import_module(plugin.module)
        except RegistryClash as exc:
            raise PluginError(f"{plugin.describe()}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - any import failure is the plugin's
            raise PluginError(
                f"{plugin.describe()}: cannot import {plugin.module}: {type(exc).__name__}: {exc}"
            ) from None
        _LOADED[plugin.module] = plugin
    return list(_LOADED.values())


def records() -> list[dict[str, str | None]]:
    """The plugins this process loaded, each with the SHA-256 of its source, as
    provenance records them (``provenance.plugins``)."""
    return [
        {
            "name": p.name,
            "module": p.module,
            "package": p.package,
            "version": p.version,
            "source_sha256": source_digest(p.module),
        }
        for p in _LOADED.values()
    ]


def plugin_of(module: str) -> Plugin | None:
    """The loaded plugin that ``module`` belongs to (its module or a module of the same
    top-level package), or None for the package's own and unknown modules."""
    top = module.split(".")[0]
    if top == "vqarobust":
        return None
    for plugin in _LOADED.values():
        if module == plugin.module or module.startswith(plugin.module + "."):
            return plugin
    return next((p for p in _LOADED.values() if p.module.split(".")[0] == top), None)


def describe(module: str) -> str:
    """Where a registered name comes from, for listings: ``built-in`` or the plugin."""
    plugin = plugin_of(module)
    if plugin is None:
        return "built-in" if module.split(".")[0] == "vqarobust" else f"module {module}"
    return plugin.describe().removeprefix("plugin ")


def _plugin_files(module: str) -> list[Path]:
    """The source files a plugin module runs: its own package's (:func:`~vqarobust.
    code_digest.module_files`, relative imports followed) or its one file."""
    from vqarobust.code_digest import module_files

    spec = importlib.util.find_spec(module.split(".")[0])
    if spec is not None and spec.submodule_search_locations:
        return module_files(module)
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ModuleNotFoundError(f"no source file of plugin module {module!r}")
    return [Path(spec.origin)]


def source_digest(module: str) -> str:
    """SHA-256 of a plugin module's own source: the module and every module of its own
    package it imports, or the one file of a top-level module (a single-file module's
    sibling modules are not followed: put helpers in a package). An edit to any of them
    changes it."""
    files = _plugin_files(module)
    top = importlib.util.find_spec(module.split(".")[0])
    root = (
        Path(next(iter(top.submodule_search_locations))).parent
        if (top is not None and top.submodule_search_locations)
        else files[0].parent
    )
    h = hashlib.sha256()
    for path in files:
        # Each file by its path inside its package: a move between files changes it too.
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def digest_of(module: str) -> str | None:
    """:func:`source_digest` of a registered object's module where it is a plugin's,
    None for the package's own (whose edits the package's own digests cover)."""
    return None if module.split(".")[0] == "vqarobust" else source_digest(module)


def module_digest(module: str) -> str:
    """The digest that reruns the jobs running ``module``: the package's own
    :func:`~vqarobust.code_digest.code_digest`; for a plugin's, its
    :func:`source_digest` with the code digest of every package module it imports (an
    edit to ``vqarobust.models.base`` reruns a plugin family as it reruns the built-in
    ones)."""
    from vqarobust.code_digest import code_digest, file_digest, imports_of

    if module.split(".")[0] == "vqarobust":
        return code_digest(module)
    used = sorted(
        {name for path in _plugin_files(module) for name in imports_of(path, "vqarobust")}
    )
    h = hashlib.sha256(source_digest(module).encode())
    for name in used:
        try:
            # A registry's own file only: through it every registered module would count,
            # and an edit to any built-in analysis would rerun a plugin's.
            digest = file_digest(name) if name.endswith(".registry") else code_digest(name)
        except ModuleNotFoundError:
            continue  # a name imported from a module, not a module
        h.update(f"\n{name} {digest}".encode())
    return h.hexdigest()
