"""Progress bars on stderr, or lines where stderr is not a terminal."""

from __future__ import annotations

import time
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

#: How often progress is said in a line when stderr is not a terminal (a log, a pipe).
LINE_EVERY_S = 60.0


class Bars(Progress):
    """Progress bars on stderr: what, how far, the time so far and the time still to go. Where
    stderr is not a terminal (bars are drawn only on one), a line per task instead: its first
    count, then at most one every ``every_s``, and its last."""

    def __init__(self, console: Console, every_s: float = LINE_EVERY_S) -> None:
        super().__init__(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            disable=not console.is_terminal,  # no bar drawn where lines are said
        )
        self.every_s = every_s
        self._said: dict[TaskID, float] = {}
        self._ended: set[TaskID] = set()

    def advance(self, task_id: TaskID, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    def update(self, task_id: TaskID, **changes: Any) -> None:
        super().update(task_id, **changes)
        if self.console.is_terminal or task_id in self._ended:
            return
        task = self._tasks[task_id]
        said = self._said.get(task_id)
        if said is not None and time.monotonic() - said < self.every_s and not task.finished:
            return
        self._say(task_id)

    def stop(self) -> None:
        """Stop; where lines are said, the last count of every task not yet said whole (one
        that ended short of its total: a failure is not drawn as done)."""
        if not self.console.is_terminal:
            for task_id in [t for t in self._tasks if t not in self._ended]:
                self._say(task_id)
        super().stop()

    def _say(self, task_id: TaskID) -> None:
        task = self._tasks[task_id]
        self._said[task_id] = time.monotonic()
        if task.finished:
            self._ended.add(task_id)
        total = "?" if task.total is None else f"{task.total:.0f}"
        left = task.time_remaining
        eta = "" if left is None or task.finished else f", about {left:.0f} s to go"
        self.console.print(
            f"{task.description}: {task.completed:.0f}/{total} after {task.elapsed or 0:.0f} s"
            f"{eta}",
            highlight=False,
        )
