"""Logging set-up shared by the Snakemake scripts and the CLI."""

from __future__ import annotations

import logging
import os
import sys
from types import TracebackType


def _log_uncaught(kind: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
    # A job's stderr goes to the scheduler's output, not to the rule's log file; put the
    # traceback where a person looks first.
    logging.getLogger("vqarobust").critical("job failed", exc_info=(kind, exc, tb))


def quiet_progress_bars() -> None:
    """No per-tensor "Loading weights" / "Writing model shards" bars in job logs.

    The Hugging Face libraries read the switch when first imported, so set it in the
    environment, and flip it in any of them already imported (without importing them:
    a corruption job never needs transformers).
    """
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    os.environ["HF_DATASETS_DISABLE_PROGRESS_BARS"] = "1"
    # huggingface_hub may be imported without its utils submodule loaded yet.
    if "huggingface_hub.utils" in sys.modules:
        sys.modules["huggingface_hub.utils"].disable_progress_bars()
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "datasets" in sys.modules:
        sys.modules["datasets"].disable_progress_bars()


def setup_logging(path: str | os.PathLike[str] | None = None, level: int = logging.INFO) -> None:
    """Log to ``path`` (and stderr), capturing Python warnings and uncaught exceptions;
    library progress bars off."""
    quiet_progress_bars()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        handlers.append(logging.FileHandler(path, mode="w", encoding="utf-8"))
    logging.basicConfig(
        level=level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        handlers=handlers,
        force=True,
    )
    logging.captureWarnings(True)
    if path:
        sys.excepthook = _log_uncaught
