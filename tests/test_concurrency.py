"""The served client's concurrency limit (vqarobust.models.concurrency) and its request
order, unit by unit, then against a simulated server that refuses beyond its queue."""

from __future__ import annotations

import threading

import pytest
from PIL import Image

from tests.chat_server import CostServer
from vqarobust.models import load_model
from vqarobust.models.base import VQAModel
from vqarobust.models.concurrency import BASELINE_REPLIES, ConcurrencyLimit, Outcome


def _replies(limit: ConcurrencyLimit, n: int, latency_s: float = 1.0) -> None:
    for _ in range(n):
        assert limit.acquire()
        limit.release(Outcome.REPLY, latency_s)


def _ends(limit: ConcurrencyLimit, n: int, outcome: Outcome) -> None:
    for _ in range(n):
        assert limit.acquire()
        limit.release(outcome)


def test_slow_start_doubles_per_window_up_to_the_ceiling():
    limit = ConcurrencyLimit(ceiling=8)
    assert limit.limit == 1
    _replies(limit, 1)  # a window of 1
    assert limit.limit == 2
    _replies(limit, 2)
    assert limit.limit == 4
    _replies(limit, 4)
    assert limit.limit == 8
    _replies(limit, 50)
    assert limit.limit == 8  # the ceiling


def test_overload_halves_then_growth_is_one_per_window():
    limit = ConcurrencyLimit(ceiling=32)
    _replies(limit, 1 + 2 + 4 + 8)
    assert limit.limit == 16
    _ends(limit, 1, Outcome.OVERLOADED)
    assert (limit.limit, limit.slow_start) == (8, False)
    _replies(limit, 7)
    assert limit.limit == 8
    _replies(limit, 1)  # the eighth success closes the window: +1, not x2
    assert limit.limit == 9
    _replies(limit, 9)
    assert limit.limit == 10


def test_the_limit_never_drops_below_one_and_fixed_never_moves():
    limit = ConcurrencyLimit(ceiling=4)
    _ends(limit, 5, Outcome.OVERLOADED)
    assert limit.limit == 1
    fixed = ConcurrencyLimit(ceiling=4, adaptive=False)
    _ends(fixed, 3, Outcome.OVERLOADED)
    _replies(fixed, 3, latency_s=100.0)
    assert fixed.limit == 4 and fixed.mean_limit == 4
    with pytest.raises(ValueError, match="max_concurrency must be >= 1"):
        ConcurrencyLimit(ceiling=0)


def test_a_rising_smoothed_latency_cuts_once_per_window():
    """Latencies 1 s, then 10 s: the moving average (weight 0.2) is 2.8 after the first
    slow reply and 4.24 after the second, so the cut comes on the second (4.24 > 4 x 1).
    The requests in flight at the cut cannot cut again."""
    limit = ConcurrencyLimit(ceiling=16)
    _replies(limit, 1 + 2 + 4 + 8)  # limit 16, all at 1 s
    assert limit.limit == 16
    for _ in range(3):
        assert limit.acquire()
    _replies(limit, 1, latency_s=10.0)  # average 2.8
    _replies(limit, 1, latency_s=10.0)  # 4.24: cut, with 3 still in flight
    assert limit.limit == 8
    for _ in range(3):  # the three sent before the cut, slow too
        limit.release(Outcome.REPLY, 10.0)
    assert limit.limit == 8
    _ends(limit, 1, Outcome.OVERLOADED)
    assert limit.limit == 4  # a new signal after the window cuts again


def test_failures_that_are_not_overload_move_the_limit_neither_way():
    limit = ConcurrencyLimit(ceiling=32)
    _replies(limit, 1 + 2)
    assert limit.limit == 4
    _ends(limit, 40, Outcome.FAILED)  # 502s, refused connections, malformed bodies
    assert limit.limit == 4 and limit.replies == 3


def test_an_early_fast_fluke_leaves_the_baseline_after_a_window_of_replies():
    """Three replies at 2 ms (an error page, a cached reply), then a steady 50 ms: the
    baseline is the lowest moving average of the last 200 replies, so once the fluke has
    left it the limit grows again instead of staying at 1."""
    limit = ConcurrencyLimit(ceiling=32)
    _replies(limit, 3, latency_s=0.002)
    _replies(limit, 2000, latency_s=0.05)
    assert limit.lowest_s == pytest.approx(0.05)
    assert limit.limit == 32
    assert BASELINE_REPLIES < 2000


def test_acquire_waits_for_a_slot_and_can_be_cancelled():
    limit = ConcurrencyLimit(ceiling=1, adaptive=False)
    assert limit.acquire()
    cancelled = threading.Event()
    got: list[bool] = []
    waiter = threading.Thread(target=lambda: got.append(limit.acquire(cancelled)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # blocked: the one slot is taken
    cancelled.set()
    waiter.join(2)
    assert got == [False] and limit.in_flight == 1


def test_a_served_model_sends_an_images_questions_together():
    a, b, c = (Image.new("RGB", (4, 4), colour) for colour in ("red", "green", "blue"))
    client = load_model(
        {"family": "openai-chat", "base_url": "http://127.0.0.1:9/v1", "model": "m"}, name="served"
    )
    images = [a, b, a, c, b, a]
    questions = ["q"] * 3 + ["a much longer question?"] * 3
    assert client.request_order(images, questions).tolist() == [0, 2, 5, 1, 4, 3]
    # The in-process adapters batch longest first.
    assert VQAModel.request_order(client, images, questions).tolist() == [3, 4, 5, 0, 1, 2]


def test_the_adaptive_limit_keeps_a_server_below_its_queue():
    """A ceiling of 32 against a server that refuses beyond 8 in flight: the fixed limit
    gets refusals by the dozen, the adaptive one a few, and both answer everything."""
    images = [Image.new("RGB", (8, 8), (i, 0, 0)) for i in range(12) for _ in range(8)]
    questions = [f"question {i}?" for i in range(len(images))]
    refused = {}
    for adaptive in (False, True):
        with CostServer(slots=4, prefill_s=0.02, decode_s=0.01, max_queue=8) as server:
            client = load_model(
                {
                    "family": "openai-chat",
                    "base_url": server.base_url,
                    "model": "m",
                    "max_concurrency": 32,
                    "max_retries": 10,
                    "adaptive_concurrency": adaptive,
                    "batch_size": 96,
                },
                name="served",
            )
            answers = client.answer_all(images, questions)
            client.close()
        assert answers == ["yes"] * len(questions)
        refused[adaptive] = server.refused
        if adaptive:
            assert 1 <= client.limit.lowest_limit <= client.limit.highest_limit <= 32
    assert refused[True] < refused[False]
