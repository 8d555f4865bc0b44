"""How many requests a served model keeps in flight: a fixed number, or a limit that
adapts to the server (docs/models.md, "Served models at scale").

The adaptive limit works like TCP congestion control: it starts at 1 and doubles after
each window of successful replies (slow start) until the first sign of overload, then
grows by one per window (additive increase), and halves on overload (multiplicative
decrease), once per window: the requests already in flight when it halved, sent under
the old limit, cannot cut it again. Overload is a reply the server refused for load
(429, 503) or a smoothed latency (an exponential moving average, so that replies from
the server's prefix cache and replies without it average out) above ``latency_factor``
times the lowest smoothed latency seen: a server that queues requests answers later
before it refuses. The user's ``max_concurrency`` is the ceiling; the limit never drops
below 1.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

# Replies that say the server is overloaded (the others that are retried, 5xx and
# timeouts, say it is broken, which a lower limit does not fix).
OVERLOAD_STATUS = frozenset({429, 503})
LATENCY_FACTOR = 4.0
SMOOTHING = 0.2  # weight of the newest latency in the moving average


@dataclass
class ConcurrencyLimit:
    """Admission of requests: :meth:`acquire` blocks while ``limit`` are in flight;
    :meth:`release` reports how the request went. Thread-safe."""

    ceiling: int
    adaptive: bool = True
    latency_factor: float = LATENCY_FACTOR
    limit: float = field(init=False)
    in_flight: int = field(default=0, init=False)
    smoothed_s: float | None = field(default=None, init=False)
    lowest_s: float | None = field(default=None, init=False)
    slow_start: bool = field(default=True, init=False)
    history: list[int] = field(default_factory=list, init=False)

    def __post_init__(self) -> None:
        if self.ceiling < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.ceiling}")
        self.limit = 1.0 if self.adaptive else float(self.ceiling)
        self._cond = threading.Condition()
        self._acked = 0  # successes since the limit last changed
        self._cooldown = 0  # replies still due from before the last cut

    def acquire(self, cancelled: threading.Event | None = None) -> bool:
        """Wait for a free slot; False when ``cancelled`` is set first."""
        with self._cond:
            while self.in_flight >= int(self.limit):
                if cancelled is not None and cancelled.is_set():
                    return False
                self._cond.wait(0.05)
            self.in_flight += 1
            return True

    def release(self, latency_s: float | None = None, overloaded: bool = False) -> None:
        """A request ended: ``latency_s`` for a reply, ``overloaded`` for a refusal."""
        with self._cond:
            self.in_flight -= 1
            if self.adaptive:
                self._adapt(latency_s, overloaded)
            self._cond.notify_all()

    def _adapt(self, latency_s: float | None, overloaded: bool) -> None:
        slow = False
        if latency_s is not None:
            s = self.smoothed_s
            self.smoothed_s = latency_s if s is None else s + SMOOTHING * (latency_s - s)
            self.lowest_s = min(self.lowest_s or self.smoothed_s, self.smoothed_s)
            slow = self.smoothed_s > self.latency_factor * self.lowest_s
        if self._cooldown > 0:
            self._cooldown -= 1
        elif overloaded or slow:
            self.limit = max(1.0, self.limit / 2)
            self.slow_start = False
            self._acked = 0
            self._cooldown = self.in_flight
        else:
            self._acked += 1
            if self._acked >= int(self.limit):  # a window of successes
                grown = self.limit * 2 if self.slow_start else self.limit + 1
                self.limit = min(float(self.ceiling), grown)
                self._acked = 0
        self.history.append(int(self.limit))
