"""The e-commerce example of the Flexi-Match design, end to end: product sheets holding several
products each, shoppers' phrasings, and the library profile and matching texts that make the
right product come first.

The same products are published three ways: as sheets under the default chain (cut by size),
as sheets in a library whose profile cuts at each product (pattern chunker), and as the
publisher's own chunks, one per product, each with a short description as its matching text.
A shopper's query is answered well when its first hit is the wanted product and no other.
"""

from __future__ import annotations

import pytest
from kbus_client import KbClient
from kbus_contract import (
    Chunker,
    ChunkerKind,
    LibraryProfile,
    Matching,
    MatchingKind,
    SearchHit,
)

from tests.e2e.conftest import Stack

#: name, what the sheet says, and the one-sentence description the shop writes for it.
PRODUCTS = {
    "Footwear": [
        (
            "Trail runner 2",
            "Mesh upper, lugged outsole, Gore-Tex membrane. 280 g.",
            "A waterproof running shoe for muddy forest trails in the rain.",
        ),
        (
            "City sneaker",
            "White leather upper, cupsole, cotton laces.",
            "A smart white leather shoe for the office and city streets.",
        ),
        (
            "Winter boot X200",
            "Fleece lining, rated to -20 C, rubber shell.",
            "An insulated boot that keeps feet warm in deep snow.",
        ),
        (
            "Flip-flop Pool",
            "EVA footbed, quick-dry strap.",
            "A light sandal for the beach, the pool and hot summer days.",
        ),
    ],
    "Kitchen": [
        (
            "Kettle K1",
            "1.7 l, 3000 W, auto shut-off.",
            "An electric kettle that boils water for tea in two minutes.",
        ),
        (
            "Toaster T2",
            "Two slots, seven browning levels, crumb tray.",
            "A toaster that browns slices of bread for breakfast.",
        ),
        (
            "Blender B5",
            "1.5 l jar, 900 W, ice-crush program.",
            "A blender for smoothies, soups and crushed ice.",
        ),
        (
            "Coffee grinder G3",
            "Conical burrs, 40 grind settings.",
            "A grinder that turns coffee beans into powder for espresso or filter coffee.",
        ),
    ],
}
QUERIES = {
    "waterproof shoes for running in the rain": "Trail runner 2",
    "smart shoes to wear to the office": "City sneaker",
    "something to keep my feet warm in the snow": "Winter boot X200",
    "sandals for the beach": "Flip-flop Pool",
    "boil water for tea": "Kettle K1",
    "make toast for breakfast": "Toaster T2",
    "make smoothies": "Blender B5",
    "grind beans for espresso": "Coffee grinder G3",
}
NAMES = [name for products in PRODUCTS.values() for name, _, _ in products]


def _product(name: str, sheet_text: str) -> str:
    return f"Product: {name}\n{sheet_text}"


def _only(hit: SearchHit | None, name: str) -> bool:
    """The hit is the wanted product and no other."""
    return hit is not None and [n for n in NAMES if f"Product: {n}\n" in hit.text] == [name]


async def _publish(kb: KbClient) -> None:
    sheet_profile = LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:"))
    await kb.profile("sheets", set_to=sheet_profile)
    for sheet, products in PRODUCTS.items():
        text = "\n\n".join(_product(name, said) for name, said, _ in products)
        for library in ("default", "sheets"):
            await kb.publish_document(
                library=library, document_id=sheet, title=sheet, text=text, wait=True
            )
        await kb.publish_document(
            library="catalog",
            document_id=sheet,
            title=sheet,
            chunks=[_product(name, said) for name, said, _ in products],
            matching=[(described,) for _, _, described in products],
            wait=True,
        )


@pytest.fixture
async def kb(stack: Stack) -> KbClient:
    return await KbClient.connect(stack.nats_url, prefix=stack.topology.prefix, tenant="shop")


async def test_the_library_s_chain_finds_the_product_a_shopper_describes(kb: KbClient) -> None:
    async with kb:
        await _publish(kb)
        right = dict.fromkeys(("default", "sheets", "catalog"), 0)
        described = 0
        for query, name in QUERIES.items():
            for library in right:
                reply = await kb.search(query, libraries=[library], min_evidence=-1)
                first = reply.results[0] if reply.results else None
                right[library] += _only(first, name)
                if library == "catalog" and first is not None and first.matched:
                    assert first.matched in {d for p in PRODUCTS.values() for *_, d in p}
                    described += 1
    # Cut by size, a sheet is one chunk: no answer is one product.
    assert right["default"] == 0, right
    # Cut at each product, every answer is one product, but the shopper's words are not the
    # sheet's; with the shop's descriptions matched too, each query finds its product.
    assert right["sheets"] < right["catalog"] == len(QUERIES), right
    assert described > 0  # and the replies say that a description placed them


async def test_descriptions_a_model_writes_at_ingest_are_matched_too(kb: KbClient) -> None:
    """The generation stage end to end: the library's profile asks for a description of each
    product, which the generator has SmolLM2 write before the chunks are embedded."""
    written = LibraryProfile(
        chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:"),
        matching=Matching(
            kind=MatchingKind.DESCRIPTION,
            prompt="Describe the product for a shopper in one sentence: what it is and what "
            "it is for.",
        ),
    )
    async with kb:
        await kb.profile("written", set_to=written)
        for sheet, products in PRODUCTS.items():
            text = "\n\n".join(_product(name, said) for name, said, _ in products)
            await kb.publish_document(
                library="written", document_id=sheet, title=sheet, text=text, wait=True
            )
        [stats] = [s for s in (await kb.stats()).libraries if s.library == "written"]
        firsts = []
        for query in QUERIES:
            reply = await kb.search(query, libraries=["written"], min_evidence=-1)
            firsts.append(reply.results[0])
    # Each product is one chunk; its description is matched beside it, not counted as one.
    assert (stats.documents, stats.chunks) == (2, len(NAMES))
    placed = [h.matched for h in firsts if h.matched]
    assert placed, "no first hit was placed by a generated description"
