"""``python -m bench.searchpath``: the searcher's modules one search passes through, in order,
and how often each is entered.

It starts the searcher's app in this process against a running stack (``make up``), indexes
three small documents for its own tenant, and answers one ``kb.search`` request as the handler
does, under a profiler. A module is *entered* when a function of it starts (a coroutine's
first step, not its resumptions) called from another module; the list is those entries in
order. It reads nothing of a module's layout, so it measures any version of the searcher.

Then the steps: the entries the orchestrator (``kbus_searcher.search.searching``) makes, those
into one module one after another counted once. Goal (issue 59): no module is entered at two
steps, so a search's path reads top-down.
"""

from __future__ import annotations

import argparse
import asyncio
import dis
import json
import os
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from kbus_client import KbClient
from kbus_dev.stack import STATE_DIR, weaviate_key
from kbus_runtime.answering import Inbound

RESUME = dis.opmap["RESUME"]
DOCUMENTS = {
    "vpn": "Connect to the office network with the VPN client: run acme-vpn up.",
    "printer": "The third-floor printer takes badges; scan yours to release a job.",
    "lunch": "The canteen serves lunch from noon to two; Fridays are pizza.",
}

Profiler = Callable[[FrameType, str, Any], None]


ORCHESTRATOR = "kbus_searcher.search.searching"


def profiler(package: str, entries: list[tuple[str, str]]) -> Profiler:
    """A ``sys.setprofile`` hook appending each entry into a module of ``package``, with the
    module it came from."""

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code, at = frame.f_code.co_code, frame.f_lasti
        if at < 0 or code[at] != RESUME or code[at + 1] != 0:
            return  # a coroutine resumed, not a function entered
        module = str(frame.f_globals.get("__name__", ""))
        caller = str(frame.f_back.f_globals.get("__name__", "")) if frame.f_back else ""
        if module.startswith(package) and caller != module:
            entries.append((caller, module))

    return profile


async def _index(nats_url: str, tenant: str) -> None:
    async with await KbClient.connect(nats_url, tenant=tenant) as kb:
        for name, text in DOCUMENTS.items():
            await kb.publish_document(library="handbook", document_id=name, text=text, wait=True)


def steps(entries: list[tuple[str, str]]) -> list[str]:
    """The modules the orchestrator enters, in order, one entry per step (consecutive entries
    into one module are one step)."""
    out: list[str] = []
    for caller, module in entries:
        if caller == ORCHESTRATOR and (not out or out[-1] != module):
            out.append(module)
    return out


async def trace(nats_url: str, query: str) -> list[tuple[str, str]]:
    """The entries of one search, answered by a searcher started in this process."""
    import kbus_searcher.app as app_module
    from kbus_searcher.settings import SearcherSettings

    captured: dict[str, Any] = {}
    register = getattr(app_module, "register")  # noqa: B009 (the app's own import of it)

    def spy(*args: Any) -> None:
        captured["searcher"] = args[3]  # register(service, settings, indexing, searcher, ...)
        register(*args)

    setattr(app_module, "register", spy)  # noqa: B010
    # The stack's key (make up made it), unless the caller says which.
    os.environ.setdefault("KBUS_WEAVIATE_API_KEY", weaviate_key(STATE_DIR / "data"))
    app = app_module.create_app(SearcherSettings(index=False))
    tenant = f"trace{uuid.uuid4().hex[:8]}"
    await _index(nats_url, tenant)
    body = {"tenant": tenant, "libraries": ["handbook"], "query": query}
    inbound = Inbound(json.dumps(body).encode(), f"kb.search.{tenant}._all")
    entries: list[tuple[str, str]] = []
    async with app.start_lifespan_context():
        await captured["searcher"].answer_search(inbound)  # warm: models, buckets, baselines
        sys.setprofile(profiler("kbus_searcher", entries))
        try:
            reply = await captured["searcher"].answer_search(inbound)
        finally:
            sys.setprofile(None)
    if getattr(reply, "kind", "") != "search_results":
        raise SystemExit(f"the search failed: {reply}")
    return entries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.searchpath", description=__doc__)
    parser.add_argument("--nats-url", default="nats://127.0.0.1:4222")
    parser.add_argument("--query", default="how do I connect to the VPN?")
    args = parser.parse_args(argv)
    entries = asyncio.run(trace(args.nats_url, args.query))
    modules = [module for _, module in entries]
    counts = Counter(modules)
    print(f"{len(counts)} modules, {len(entries)} entries")
    for module, n in counts.most_common():
        print(f"{n:4d}  {module}")
    print("order:", " > ".join(m.removeprefix("kbus_searcher.") for m in modules))
    path = steps(entries)
    twice = {m: n for m, n in Counter(path).items() if n > 1}
    print(f"the orchestrator's steps ({len(path)}):", " > ".join(_short(m) for m in path))
    print(
        "entered at more than one step:",
        ", ".join(f"{_short(m)} {n}" for m, n in twice.items()) or "none",
    )
    return 0


def _short(module: str) -> str:
    return module.removeprefix("kbus_searcher.")


if __name__ == "__main__":
    raise SystemExit(main())
