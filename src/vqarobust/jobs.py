"""What every workflow script does first (workflow/scripts/: thin adapters)."""

from __future__ import annotations

import logging
import os
import sys

from vqarobust import plugins
from vqarobust.collector import freeze_imports
from vqarobust.logs import setup_logging

log = logging.getLogger(__name__)

# The variables that keep huggingface_hub, transformers and datasets off the network.
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def go_offline() -> None:
    """Keep this process (and any it starts) off the Hugging Face Hub: the variables of
    :data:`OFFLINE_VARIABLES` set to 1, and huggingface_hub's own flag too where it was
    imported already (it reads the variable once, at import)."""
    for name in OFFLINE_VARIABLES:
        os.environ[name] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        constants.HF_HUB_OFFLINE = True


def start_job(log_path: str | os.PathLike[str], allow_download: bool = False) -> None:
    """Log to the job's file (and stderr), then load the plugins, the installed ones and
    the config's modules the Snakefile exported (:mod:`vqarobust.plugins`), so that a
    plugin's corruption, perturbation, model family or analysis resolves in the job's
    process as it did when the workflow started. A plugin that fails here fails the job
    with the same one-line message.

    Unless the job's own settings allow downloads (``allow_download``: its model entry's
    ``allow_download``, a sentence model's, ``basic_questions.allow_download``,
    ``dataset.download``), the job runs offline (:func:`go_offline`): set here, in the
    job's process, from its params, so it holds wherever the job runs, a cluster node
    included.

    Each script imports with the garbage collector off (its first lines, after
    Snakemake's preamble): the imports make about 300,000 objects that live as long as
    the job and little garbage (some 7,000 objects in cycles, kept), and each full
    collection walks all the objects made so far. What they and the plugins made is
    frozen here (never walked again, at exit included) and the collector turned back on
    for the job's own work (:func:`vqarobust.collector.freeze_imports`); what the package
    imports lazily later (a model family's transformers, sentence-transformers) is
    paused and frozen where it loads (:func:`vqarobust.collector.imports_paused`).
    docs/performance.md, "Collections in job processes", has the CPU it saves."""
    setup_logging(log_path)
    if allow_download:
        log.info("downloads allowed: this job may reach the Hugging Face Hub")
    else:
        go_offline()
        log.info("offline: no setting of this job allows downloads (HF_HUB_OFFLINE=1)")
    plugins.load()
    freeze_imports()
