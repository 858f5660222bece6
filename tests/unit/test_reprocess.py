"""Cutting a library's documents again: the text is whole again from its chunks, whichever of
kbus's chunkers cut it, and what cannot be cut again from the index is named."""

from __future__ import annotations

import pytest
from kbus_contract import (
    Chunk,
    Chunker,
    ChunkerKind,
    ContentType,
    DocumentAdded,
    DocumentRef,
    LibraryProfile,
)
from kbus_contract.errors import PermanentError
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.ingesting import ranked_as
from kbus_ingestor.profiling import Cutter
from kbus_searcher.jobs.reprocess import recut, source_text
from kbus_searcher.jobs.stored import StoredDocument
from kbus_searcher.ordering import profile_version, rank

from tests.cutting import chunk_document

MARKDOWN = (
    "# Pump manual\n\nRead this first.\n\n## Priming\n\n"
    + "Open the vent and wait until water runs clear. " * 30
    + "\n\n\n   \n## Filters\n\nReplace the intake filter every 300 hours.  \n"
)
SHEET = (
    "Product: Kettle K1\n1.7 l, 3000 W.\n\n\nProduct: Toaster T2\nTwo slots.\n\n"
    "Product: Blender B5\n900 W.\n"
)
PLAIN = "The valve closes. " * 120


def _chunks(text: str, content_type: ContentType, cutter: Cutter) -> tuple[Chunk, ...]:
    added = DocumentAdded(
        tenant="t", library="l", document_id="d", title="T", text=text, content_type=content_type
    )
    return chunk_document(added, cutter, 1_000).chunks


CUTTERS = {
    "recursive": Cutter.recursive(ChunkingConfig(size=200, overlap=30)),
    "pattern": Cutter.of(
        LibraryProfile(chunker=Chunker(kind=ChunkerKind.PATTERN, pattern="^Product:")),
        ChunkingConfig(),
    ),
    "sections": Cutter.of(
        LibraryProfile(chunker=Chunker(kind=ChunkerKind.SECTIONS, max_chars=400)),
        ChunkingConfig(),
    ),
    "identity": Cutter.of(
        LibraryProfile(chunker=Chunker(kind=ChunkerKind.IDENTITY)), ChunkingConfig()
    ),
}


@pytest.mark.parametrize("cutter", CUTTERS)
@pytest.mark.parametrize(
    ("text", "content_type"),
    [(MARKDOWN, ContentType.MARKDOWN), (SHEET, ContentType.PLAIN), (PLAIN, ContentType.PLAIN)],
)
def test_a_document_s_text_is_whole_again_from_its_chunks_but_whitespace_between_them(
    cutter: str, text: str, content_type: ContentType
) -> None:
    chunks = _chunks(text, content_type, CUTTERS[cutter])
    again = source_text(list(reversed(chunks)))
    assert again is not None
    assert again.split() == text.split()
    # Cut again the same way, the chunks are the same: nothing moved.
    assert [c.text for c in _chunks(again, content_type, CUTTERS[cutter])] == [
        c.text for c in chunks
    ]


def _chunk(position: int, start: int, text: str, **extra: object) -> Chunk:
    return Chunk(
        chunk_id=f"c{position}",
        position=position,
        text=text,
        char_start=start,
        char_end=start + len(text),
        **extra,
    )


def test_chunks_that_are_not_slices_of_one_text_are_refused() -> None:
    assert source_text([_chunk(0, 0, "abcdef"), _chunk(1, 4, "XYZ")]) is None
    lying = Chunk(chunk_id="c", position=0, text="abc", char_start=0, char_end=5)
    assert source_text([lying]) is None
    assert source_text([_chunk(0, 0, "abcdef"), _chunk(1, 4, "efgh")]) == "abcdefgh"
    assert source_text([_chunk(0, 2, "ab"), _chunk(1, 6, "cd")]) == "\n\nab\n\ncd"


def test_the_version_names_the_profile_s_revision_once_and_stays_within_bounds() -> None:
    assert profile_version("v3", 7) == "v3+profile7"
    assert profile_version("v3+profile7", 9) == "v3+profile9"
    long = profile_version("x" * 128, 12)
    assert len(long) == 128
    assert long.endswith("+profile12")


def _stored(chunks: list[Chunk], version: str = "v1") -> StoredDocument:
    ref = DocumentRef(
        tenant="t",
        library="l",
        document_id="d",
        version=version,
        title="Manual",
        source_uri="s3://manuals/pump.md",
        content_type=ContentType.PLAIN,
        metadata={},
    )
    return StoredDocument(ref, chunks)


def test_a_recut_publish_keeps_the_document_s_title_metadata_and_markdown() -> None:
    chunks = list(_chunks(MARKDOWN, ContentType.MARKDOWN, CUTTERS["recursive"]))
    chunks = [c.model_copy(update={"metadata": {"team": "pumps"}}) for c in chunks]
    added = recut(_stored(chunks), 4)
    assert isinstance(added, DocumentAdded)
    assert added.content_type is ContentType.MARKDOWN
    assert (added.title, added.source_uri, added.metadata) == (
        "Manual",
        "s3://manuals/pump.md",
        {"team": "pumps"},
    )
    assert added.version == "v1+profile4"
    plain = recut(_stored([_chunk(0, 0, "Plain words.")]), 4)
    assert isinstance(plain, DocumentAdded)
    assert plain.content_type is ContentType.PLAIN


def test_pages_and_records_are_named_not_cut_again() -> None:
    paged = recut(_stored([_chunk(0, 0, "Page one.", page=1), _chunk(1, 10, "Two.", page=2)]), 1)
    assert isinstance(paged, str)
    assert "pages" in paged
    records = [
        _chunk(0, 0, "Kettle.", metadata={"sku": "K1"}),
        _chunk(1, 8, "Toaster.", metadata={"sku": "T2"}),
    ]
    named = recut(_stored(records), 1)
    assert isinstance(named, str)
    assert "records" in named


def test_a_text_cut_again_ranks_as_the_publish_it_was_cut_from() -> None:
    doc = DocumentAdded(tenant="t", library="l", document_id="d", title="T", text="x")
    assert ranked_as(doc, 40) == 40
    recut = doc.model_copy(update={"recut_of": 12})
    assert ranked_as(recut, 40) == 12
    with pytest.raises(PermanentError, match="after this one"):
        ranked_as(doc.model_copy(update={"recut_of": 41}), 40)
    # Of two at one sequence, the later profile revision's is the newer; a later publish wins.
    assert rank(12, "v1") < rank(12, "v1+profile2") < rank(12, "v1+profile10") < rank(13, "v2")
