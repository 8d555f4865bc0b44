import logging
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vqarobust.progress import Progress, _duration


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.progress"]


def test_one_line_per_tenth_with_rate_and_eta(caplog):
    clock = Clock()
    p = Progress("m clean/0", 200, "questions", logging.getLogger("test.progress"), clock=clock)
    with caplog.at_level(logging.INFO, "test.progress"):
        for _ in range(10):  # 10 batches of 20 questions, 2 s each: 10 q/s
            clock.t += 2.0
            p.advance(20)
    lines = _lines(caplog)
    assert len(lines) == 10
    assert lines[0] == "m clean/0: 10% (20/200 questions), 10.0 questions/s, ETA 18s"
    assert lines[4] == "m clean/0: 50% (100/200 questions), 10.0 questions/s, ETA 10s"
    assert lines[-1] == "m clean/0: 100% (200/200 questions), 10.0 questions/s"


def test_a_batch_crossing_several_tenths_logs_once(caplog):
    clock = Clock()
    p = Progress("x", 100, "images", logging.getLogger("test.progress"), clock=clock)
    with caplog.at_level(logging.INFO, "test.progress"):
        clock.t = 1.0
        p.advance(5)  # below 10%: nothing
        clock.t = 70.0
        p.advance(60)  # 65% after 70 s: one line, 35 / (65 / 70) = 37.7 s left
        clock.t = 100.0
        p.advance(35)
    assert _lines(caplog) == [
        "x: 65% (65/100 images), 0.9 images/s, ETA 38s",
        "x: 100% (100/100 images), 1.0 images/s",
    ]


def test_nothing_to_do_logs_nothing_and_bad_arguments_fail(caplog):
    with caplog.at_level(logging.INFO, "test.progress"):
        Progress("x", 0, logger=logging.getLogger("test.progress")).advance(0)
    assert _lines(caplog) == []
    with pytest.raises(ValueError, match="total"):
        Progress("x", -1)
    with pytest.raises(ValueError, match="step"):
        Progress("x", 1, step=0)
    with pytest.raises(ValueError, match="advance"):
        Progress("x", 1).advance(-1)


@given(total=st.integers(1, 5000), batches=st.lists(st.integers(1, 700), min_size=1))
def test_never_more_than_ten_lines_and_the_last_at_100_percent(total, batches):
    logger = logging.getLogger("test.progress.hyp")
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        p = Progress("x", total, logger=logger, clock=Clock())
        for b in batches:
            p.advance(b)
        if sum(batches) < total:
            p.advance(total)
    finally:
        logger.removeHandler(handler)
    assert 1 <= len(seen) <= 10
    assert re.match(rf"x: 100% \({total:,}/{total:,} items\)", seen[-1])


def test_durations_read_short():
    assert [_duration(s) for s in (0, 42.4, 185, 3725)] == ["0s", "42s", "3m05s", "1h02m"]
