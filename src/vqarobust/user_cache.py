"""Where vqarobust keeps what it may recompute at any time, each entry keyed by the
content it was computed from: ``$VQAROBUST_CACHE``, else ``$XDG_CACHE_HOME/vqarobust``,
else ``~/.cache/vqarobust``. Deleting the folder loses nothing but time."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not created here)."""
    if os.environ.get("VQAROBUST_CACHE"):
        return Path(os.environ["VQAROBUST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "vqarobust"
