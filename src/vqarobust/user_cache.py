"""Where vqarobust keeps what it may recompute at any time, each entry keyed by the
content it was computed from: ``$VQAROBUST_CACHE``, else ``$XDG_CACHE_HOME/vqarobust``,
else ``~/.cache/vqarobust``. Deleting the folder loses nothing but time."""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not created here), as an absolute path: every job finds the same
    one whatever its working directory. A relative ``$XDG_CACHE_HOME`` is ignored, as the
    XDG specification says; ``Path.home()``'s RuntimeError where no home is known."""
    if os.environ.get("VQAROBUST_CACHE"):
        return Path(os.environ["VQAROBUST_CACHE"]).absolute()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    base = Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache"
    return base / "vqarobust"
