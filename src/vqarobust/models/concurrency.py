"""How many requests a served model keeps in flight: a fixed number, or a limit that
adapts to the server (docs/models.md, "Served models at scale").

The adaptive limit works like TCP congestion control: it starts at 1 and doubles after
each window of successful replies (slow start) until the first sign of overload, then
grows by one per window (additive increase), and halves on overload (multiplicative
decrease), once per window: the requests already in flight when it halved, sent under
the old limit, cannot cut it again. Overload is a reply the server refused for load
(429, 503) or a smoothed latency (an exponential moving average, so that replies from
the server's prefix cache and replies without it average out) above ``latency_factor``
times the lowest smoothed latency of the last 200 replies: a server that queues requests
answers later before it refuses. A timeout counts as overload too; other failures (a 5xx, a refused
connection, a malformed body) move the limit neither way. The user's ``max_concurrency``
is the ceiling; the limit never drops below 1.
"""

from __future__ import annotations

import enum
import threading
from collections import deque
from dataclasses import dataclass, field

# Replies that say the server is overloaded (the others that are retried, 5xx and
# refused connections, say it is broken, which a lower limit does not fix).
OVERLOAD_STATUS = frozenset({429, 503})
LATENCY_FACTOR = 4.0
SMOOTHING = 0.2  # weight of the newest latency in the moving average
# The baseline is the lowest moving average of the last this many replies, so that an
# early fluke (a fast error page, a cached reply) does not hold the limit down for a job.
BASELINE_REPLIES = 200


class Outcome(enum.Enum):
    """How a request ended, as the limit reads it."""

    REPLY = "reply"  # a valid reply: its latency counts, it closes windows
    OVERLOADED = "overloaded"  # 429, 503 or a timeout: halve
    FAILED = "failed"  # another failure (5xx, refused, malformed): no signal either way


@dataclass
class ConcurrencyLimit:
    """Admission of requests: :meth:`acquire` blocks while ``limit`` are in flight;
    :meth:`release` reports how the request went. Thread-safe. ``replies``,
    ``lowest_limit``, ``highest_limit`` and :attr:`mean_limit` summarize the limit over
    the valid replies."""

    ceiling: int
    adaptive: bool = True
    latency_factor: float = LATENCY_FACTOR
    limit: float = field(init=False)
    in_flight: int = field(default=0, init=False)
    smoothed_s: float | None = field(default=None, init=False)
    slow_start: bool = field(default=True, init=False)
    replies: int = field(default=0, init=False)
    lowest_limit: int | None = field(default=None, init=False)
    highest_limit: int | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.ceiling < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.ceiling}")
        self.limit = 1.0 if self.adaptive else float(self.ceiling)
        self._cond = threading.Condition()
        self._acked = 0  # replies since the limit last changed
        self._cooldown = 0  # requests still due from before the last cut
        self._recent: deque[float] = deque(maxlen=BASELINE_REPLIES)
        self._limit_sum = 0

    @property
    def lowest_s(self) -> float | None:
        """The baseline: the lowest moving average of the recent replies."""
        return min(self._recent) if self._recent else None

    @property
    def mean_limit(self) -> float | None:
        """The mean limit over the valid replies (None before the first)."""
        return self._limit_sum / self.replies if self.replies else None

    def acquire(self, cancelled: threading.Event | None = None) -> bool:
        """Wait for a free slot; False when ``cancelled`` is set first."""
        with self._cond:
            while self.in_flight >= int(self.limit):
                if cancelled is not None and cancelled.is_set():
                    return False
                self._cond.wait(0.05)
            self.in_flight += 1
            return True

    def release(self, outcome: Outcome, latency_s: float | None = None) -> None:
        """A request ended with ``outcome`` (``latency_s``: a valid reply's)."""
        with self._cond:
            self.in_flight -= 1
            if self.adaptive:
                self._adapt(outcome, latency_s)
            if outcome is Outcome.REPLY:
                limit = int(self.limit)
                self.replies += 1
                self._limit_sum += limit
                self.lowest_limit = min(self.lowest_limit or limit, limit)
                self.highest_limit = max(self.highest_limit or limit, limit)
            self._cond.notify_all()

    def _adapt(self, outcome: Outcome, latency_s: float | None) -> None:
        slow = False
        if outcome is Outcome.REPLY and latency_s is not None:
            s = self.smoothed_s
            self.smoothed_s = latency_s if s is None else s + SMOOTHING * (latency_s - s)
            self._recent.append(self.smoothed_s)
            slow = self.smoothed_s > self.latency_factor * min(self._recent)
        if self._cooldown > 0:
            self._cooldown -= 1
        elif outcome is Outcome.OVERLOADED or slow:
            self.limit = max(1.0, self.limit / 2)
            self.slow_start = False
            self._acked = 0
            self._cooldown = self.in_flight
        elif outcome is Outcome.REPLY:
            self._acked += 1
            if self._acked >= int(self.limit):  # a window of replies
                grown = self.limit * 2 if self.slow_start else self.limit + 1
                self.limit = min(float(self.ceiling), grown)
                self._acked = 0
