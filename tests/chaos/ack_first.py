"""The chaos test's negative control: a service whose stages ack every message before they
process it (at most once), so a crash loses it. Run as ``python -m tests.chaos.ack_first
kbus_<service>``; the fault lives here, never in kbus's packages."""

from __future__ import annotations

import asyncio
import logging
import runpy
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from kbus_contract.wire import decode
from kbus_runtime.stage import Stage

log = logging.getLogger("chaos.ack_first")


#: Seconds a message waits between its ack and its work: every stage then holds acked,
#: unfinished messages whenever it is killed, so each kill loses some (without it, a kill often
#: found a stage with nothing acked and unfinished, and the control lost nothing by chance).
ACKED_HOLD_S = 1.0


async def _ack_first(
    self: Stage, message: Any, model: type[Any], work: Callable[[Any], Awaitable[None]]
) -> None:
    await message.ack()
    await asyncio.sleep(ACKED_HOLD_S)
    try:
        await work(decode(message.body, model))
    except Exception:
        log.exception("%s: failed after acking; the message is lost", self.name)


def main() -> None:
    """Run the service module named first on the command line with acks first."""
    Stage.settle = _ack_first  # type: ignore[method-assign]
    module = sys.argv[1]
    sys.argv = [module, *sys.argv[2:]]
    log.warning("%s: acks before processing (the chaos control): a crash loses messages", module)
    runpy.run_module(module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
