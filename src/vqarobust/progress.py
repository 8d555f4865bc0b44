"""How far a long stage is: a log line every ~10% of its items, with rate and ETA.

A job's log is what a person follows on a cluster or a long laptop run; one line per
tenth keeps it readable for any size (a 60-question subset or a 16,000-question one).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

STEP = 0.1  # one line per tenth of the items


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``: short enough for a log line."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


@dataclass
class Progress:
    """Count items done and log ``what: 30% (300/1,000 unit), 12.5 unit/s, ETA 56s``
    each time another tenth is crossed (the last line at 100%, without an ETA).

    ``clock`` is injectable so tests can drive it; nothing is logged for ``total`` 0.
    """

    what: str
    total: int
    unit: str = "items"
    logger: logging.Logger = field(default_factory=lambda: logging.getLogger("vqarobust"))
    step: float = STEP
    clock: Callable[[], float] = time.perf_counter
    done: int = 0

    def __post_init__(self) -> None:
        if self.total < 0:
            raise ValueError(f"total must be >= 0, got {self.total}")
        if not 0 < self.step <= 1:
            raise ValueError(f"step must be in (0, 1], got {self.step}")
        self._started = self.clock()
        self._next = 1  # the next tenth (as a count of steps) to report
        # Chunks of one subset answered on threads at once count into one progress.
        self._lock = threading.Lock()

    def advance(self, n: int = 1) -> None:
        """Count ``n`` more items; log once if that crosses one or more tenths."""
        if n < 0:
            raise ValueError(f"cannot advance by {n}")
        with self._lock:
            self.done = min(self.total, self.done + n)
            if not self.total:
                return
            crossed = int(self.done / self.total / self.step + 1e-9)
            if crossed < self._next:
                return
            self._next = crossed + 1
            done = self.done
        elapsed = self.clock() - self._started
        rate = done / elapsed if elapsed > 0 else float("inf")
        share = done / self.total
        line = f"{self.what}: {share:.0%} ({done:,}/{self.total:,} {self.unit})"
        if rate != float("inf"):
            line += f", {rate:.1f} {self.unit}/s"
        if done < self.total and rate not in (0, float("inf")):
            line += f", ETA {_duration((self.total - done) / rate)}"
        self.logger.info("%s", line)
