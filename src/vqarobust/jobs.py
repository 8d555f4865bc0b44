"""What every workflow script does first (workflow/scripts/: thin adapters)."""

from __future__ import annotations

import os

from vqarobust import plugins
from vqarobust.logs import setup_logging


def start_job(log_path: str | os.PathLike[str]) -> None:
    """Log to the job's file (and stderr), then load the plugins, the installed ones and
    the config's modules the Snakefile exported (:mod:`vqarobust.plugins`), so that a
    plugin's corruption, perturbation, model family or analysis resolves in the job's
    process as it did when the workflow started. A plugin that fails here fails the job
    with the same one-line message."""
    setup_logging(log_path)
    plugins.load()
