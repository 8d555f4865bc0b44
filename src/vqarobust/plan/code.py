"""The one rerun rule: the digest of the package code a job runs.

Every rule whose script runs package code carries, as its ``code`` param, the
:func:`~vqarobust.code_digest.code_digest` of the modules its script imports
(transitively, docstrings and comments left out), with the registered entries the job
applies (:func:`~vqarobust.code_digest.entry_digest`): a corruption job its corruption, a
question job its text perturbation or ranker, a swap job its context perturbations, a
model's job its family's adapter. Snakemake then reruns exactly the jobs whose code
changed; no version number is kept by hand.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from vqarobust import perturbations, plugins
from vqarobust.code_digest import code_digest, entry_digest, imports_of, module_path
from vqarobust.digests import text_sha256

PACKAGE = "vqarobust"


def default_scripts_dir() -> Path:
    """``workflow/scripts`` of the checkout this package is installed from (editable),
    else of the working directory (the rule files pass the workflow's own)."""
    checkout = Path(__file__).resolve().parents[3] / "workflow" / "scripts"
    return checkout if checkout.is_dir() else Path("workflow/scripts").resolve()


def script_modules(script: Path) -> list[str]:
    """The package modules a workflow script imports itself (absolute imports only)."""
    found = imports_of(script, PACKAGE)
    # ``from vqarobust.x import f`` names f too: keep the names that are modules.
    return sorted(name for name in found if _is_module(name))


def _is_module(name: str) -> bool:
    return module_path(name) is not None


def script_digest(script: Path) -> str:
    """The digest of the package code ``script`` imports (each file is parsed once per
    process while unchanged: :func:`vqarobust.code_digest.code_digest`)."""
    return code_digest(*script_modules(script))


def perturbation_digest(name: str) -> str:
    """One perturbation's own code: a built-in's entry digest, or a plugin's source with
    the package modules it imports (:func:`vqarobust.plugins.module_digest`)."""
    entry = perturbations.entry(name)
    if entry.origin.split(".")[0] != PACKAGE:
        return plugins.module_digest(entry.origin)
    # By its function's name: one function may be registered under several names.
    return entry_digest(entry.origin, getattr(entry.obj, "__name__", name))


def job_digest(script: Path, parts: Iterable[str] = ()) -> str:
    """A job's ``code`` param: its script's digest and those of the entries it runs."""
    return combine(script_digest(script), parts)


def combine(digest: str, parts: Iterable[str] = ()) -> str:
    """A script's ``digest`` with the digests of the entries a job runs (alone: itself)."""
    parts = list(parts)
    if not parts:
        return digest
    return text_sha256("\n".join([digest, *parts]) + "\n")
