"""The README's client snippets as one script: publish a document, search it, ask it as an
agent's tool. Against `make up`: ``uv run python examples/code/quickstart.py``."""

from __future__ import annotations

import asyncio
import os

from kbus_client import KbClient

TEXT = """# VPN

Connect to the office network with the VPN client: run `acme-vpn up` and sign in with your
badge number. The gateway is vpn.acme.example.
"""


async def main() -> None:
    url = os.environ.get("KBUS_NATS_URL", "nats://127.0.0.1:4222")
    prefix = os.environ.get("KBUS_BUS_PREFIX", "")
    async with await KbClient.connect(url, prefix=prefix, tenant="acme") as kb:
        await kb.publish_document(
            library="handbook",
            document_id="vpn.md",
            title="VPN",
            text=TEXT,
            content_type="text/markdown",
            wait=True,
        )
        reply = await kb.search("how do I connect to the VPN?", libraries=["handbook"], k=5)
        for hit in reply.results:
            print(hit.scores.final, hit.title, hit.heading_path, hit.source_uri)
        tool = kb.as_tool(name="search_handbook", libraries=["handbook"], k=5)
        print(tool.openai()["function"]["name"])
        print(await tool.call_json({"query": "how do I connect to the VPN?"}))


if __name__ == "__main__":
    asyncio.run(main())
