"""Progress where stderr is not a terminal (a log, a pipe, CI): a line per task at its first
count, at most one per interval after, and its last; never a bar, never silence."""

from __future__ import annotations

import io
import random

from kbus_cli.bars import Bars
from rich.console import Console


def _bars(every_s: float) -> tuple[Bars, io.StringIO]:
    out = io.StringIO()
    return Bars(Console(file=out, force_terminal=False, width=200), every_s), out


def test_every_update_past_the_interval_is_a_line_and_the_last_always() -> None:
    rng = random.Random(7)
    for _ in range(50):
        total = rng.randint(1, 40)
        bars, out = _bars(every_s=0.0)  # every update is due
        with bars:
            task = bars.add_task("indexing", total=total)
            for done in range(1, total + 1):
                if rng.random() < 0.5:
                    bars.update(task, completed=done)
                else:
                    bars.advance(task)
        lines = [line for line in out.getvalue().splitlines() if line.startswith("indexing:")]
        assert len(lines) == total, out.getvalue()
        assert lines[-1].startswith(f"indexing: {total}/{total} after ")


def test_a_long_interval_says_the_first_and_the_last_only() -> None:
    bars, out = _bars(every_s=3600.0)
    with bars:
        task = bars.add_task("embedding", total=500)
        for done in range(1, 501):
            bars.update(task, completed=done)
        bars.update(task, completed=500)  # said once, however often it is repeated
    lines = [line for line in out.getvalue().splitlines() if line.startswith("embedding:")]
    assert [line.split(" after ")[0] for line in lines] == [
        "embedding: 1/500",
        "embedding: 500/500",
    ]


def test_a_task_that_ends_short_says_its_last_count_when_the_bars_stop() -> None:
    bars, out = _bars(every_s=3600.0)
    with bars:
        task = bars.add_task("indexing", total=6)
        for _ in range(5):
            bars.advance(task)
        bars.update(task, description="indexing (1 failed)")
    lines = [line for line in out.getvalue().splitlines() if line.startswith("indexing")]
    assert lines[-1].startswith("indexing (1 failed): 5/6 after "), lines
