"""A context reads through the caller's view (issue 55, finding 3): a restricted chunk an
earlier publish of the same version left beside a public one is never given, whatever the
expansion, and a republish of the same version leaves no chunk of the older one behind."""

from __future__ import annotations

import uuid

import pytest
from kbus_contract import Expand

from tests.security.conftest import Locked, client_for

LIBRARY = "lib-b"


def _paragraphs(word: str, count: int) -> str:
    filler = "The committee meets in the east wing every second week of the quarter. " * 8
    return "\n\n".join(f"{filler}Paragraph {n} names the {word}." for n in range(count))


@pytest.mark.parametrize("expand", [Expand.NEIGHBOURS, Expand.SECTION, Expand.DOCUMENT])
async def test_expansion_gives_nothing_an_older_restricted_publish_left(
    locked: Locked, expand: Expand
) -> None:
    tag = uuid.uuid4().hex[:6]
    secret, public = f"secret{tag}", f"public{tag}"
    writer = await client_for(locked, "t0-all")
    reader = await client_for(locked, "t0-ro")
    try:
        first = await writer.publish_document(
            library=LIBRARY,
            document_id=f"policy-{tag}",
            text=_paragraphs(secret, 4),
            version="v1",
            access=["hr"],
            wait=True,
            timeout_s=120,
        )
        assert first.receipt is not None
        assert first.receipt.chunk_count >= 3
        again = await writer.publish_document(
            library=LIBRARY,
            document_id=f"policy-{tag}",
            text=f"Paragraph 0 names the {public}.",
            version="v1",
            wait=True,
            timeout_s=120,
        )
        assert again.receipt is not None
        direct = await reader.search(secret, libraries=[LIBRARY], search_type="keyword")
        assert direct.results == ()
        reply = await reader.search(
            public, libraries=[LIBRARY], budget_tokens=2_000, expand=expand.value
        )
        given = " ".join(p.text for p in (reply.context.passages if reply.context else ()))
        assert public in given
        assert secret not in given, f"{expand.value} gave the restricted text"
        # Not even one who may read it finds the older publish's restricted text: it is gone.
        anyone = await client_for(locked, "t0-ops")
        try:
            left = await anyone.search(
                secret, libraries=[LIBRARY], search_type="keyword", principals=["hr"]
            )
        finally:
            await anyone.close()
        assert left.results == (), "the republish left chunks of the older one"
    finally:
        await writer.close()
        await reader.close()
