"""Library profiles: the contract's checks and the chunkers a profile names."""

from __future__ import annotations

import pytest
from kbus_contract import Chunker, ChunkerKind, ContentType, DocumentAdded, LibraryProfile
from kbus_contract.errors import PermanentError
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.profiling import Cutter
from pydantic import ValidationError

from tests.cutting import chunk_document

DEFAULT = ChunkingConfig(size=512, overlap=50)
SHEET = (
    "Spring catalogue\n\n"
    "Product: Trail runner 2\nA light shoe for wet forest paths, with a grippy sole.\n\n"
    "Product: City sneaker\nA white leather shoe for offices and dry pavements.\n\n"
    "Product: Winter boot\nA lined boot that keeps feet warm in snow down to -20 C.\n"
)


def _cutter(**chunker: object) -> Cutter:
    return Cutter.of(LibraryProfile(chunker=Chunker.model_validate(chunker)), DEFAULT)


def _doc(text: str, content_type: ContentType = ContentType.PLAIN) -> DocumentAdded:
    return DocumentAdded(
        tenant="shop",
        library="products",
        document_id="sheet",
        title="",
        text=text,
        content_type=content_type,
    )


@pytest.mark.parametrize(
    ("chunker", "reason"),
    [
        ({"kind": "pattern"}, "exactly when"),
        ({"kind": "identity", "pattern": "^x"}, "exactly when"),
        ({"kind": "pattern", "pattern": "(unclosed"}, "does not compile"),
        ({"kind": "pattern", "pattern": "^"}, "matches the empty text"),
        ({"kind": "pattern", "pattern": "x*"}, "matches the empty text"),
        ({"kind": "recursive", "size": 100, "overlap": 60}, "less than half"),
        ({"kind": "sentences"}, "recursive"),
        ({"kind": "pattern", "pattern": "x" * 201}, "at most 200"),
    ],
)
def test_a_profile_that_cannot_work_is_refused_with_the_reason(
    chunker: dict[str, object], reason: str
) -> None:
    with pytest.raises(ValidationError, match=reason):
        LibraryProfile.model_validate({"chunker": chunker})


def test_re2_refuses_what_could_backtrack_and_what_it_lacks() -> None:
    with pytest.raises(ValueError, match="RE2"):
        _cutter(kind="pattern", pattern="(?<=x)y")
    # Linear time whatever the pattern: the classic catastrophic one is instant on RE2.
    cutter = _cutter(kind="pattern", pattern="(a+)+$")
    assert cutter.scopes("a" * 50_000 + "b") == [(0, 50_001)]


def test_the_pattern_chunker_cuts_where_each_product_starts_and_never_across() -> None:
    ready = chunk_document(_doc(SHEET), _cutter(kind="pattern", pattern=r"^Product:"), 100)
    texts = [c.text for c in ready.chunks]
    assert texts[0] == "Spring catalogue"
    assert [t.split("\n")[0] for t in texts[1:]] == [
        "Product: Trail runner 2",
        "Product: City sneaker",
        "Product: Winter boot",
    ]
    for chunk in ready.chunks:
        assert SHEET[chunk.char_start : chunk.char_end] == chunk.text
    # Keyword search sees a product's own words, not its neighbours'.
    sneaker = ready.chunks[2]
    assert "leather" in sneaker.keywords
    assert "snow" not in sneaker.keywords


def test_a_long_part_is_cut_further_by_size() -> None:
    long_part = "Product: Tent\n" + "A tent for four people with two doors. " * 40
    ready = chunk_document(
        _doc(long_part), _cutter(kind="pattern", pattern="^Product:", size=200), 100
    )
    assert len(ready.chunks) > 1
    assert all(len(c.text) <= 200 for c in ready.chunks)


def test_the_identity_chunker_keeps_a_document_whole_or_refuses_it() -> None:
    text = "# Title\n\nFirst section.\n\n## Second\n\n" + "Words and more words. " * 40
    [whole] = chunk_document(_doc(text, ContentType.MARKDOWN), _cutter(kind="identity"), 100).chunks
    assert whole.text == text.strip()
    with pytest.raises(PermanentError, match="keeps at most 100") as refused:
        chunk_document(_doc(text), _cutter(kind="identity", max_chars=100), 100)
    assert refused.value.code == "too_large"


def test_sizes_left_unset_are_the_ingestor_s_and_fitted_to_a_small_size() -> None:
    assert _cutter().config == DEFAULT
    small = _cutter(size=60)
    assert (small.config.size, small.config.overlap) == (60, 29)
    assert Cutter.recursive(DEFAULT).chunker.kind is ChunkerKind.RECURSIVE


def test_supplied_chunks_are_indexed_as_given_whatever_the_profile() -> None:
    chunks = ("Kettle: boils water.", "Toaster: browns bread.\nTwo slots.")
    doc = DocumentAdded.model_validate(
        {"tenant": "shop", "library": "p", "document_id": "d", "title": "", "chunks": chunks}
    )
    assert doc.text == "Kettle: boils water.\n\nToaster: browns bread.\nTwo slots."
    ready = chunk_document(doc, _cutter(kind="identity", max_chars=10), 100)
    assert tuple(c.text for c in ready.chunks) == chunks
    for chunk in ready.chunks:
        assert doc.text[chunk.char_start : chunk.char_end] == chunk.text
    assert "bread" not in ready.chunks[0].keywords
    # The same text cut at other places is another version.
    joined = DocumentAdded.model_validate({**doc.model_dump(), "chunks": (doc.text,)})
    assert joined.effective_version() != doc.effective_version()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"chunks": ("a", " ")}, "chunk 1 is empty"),
        ({"chunks": ("a", "b"), "text": "a b"}, "their concatenation"),
        ({"chunks": ()}, "at least 1"),
        ({"chunks": ("a",), "content_type": "text/html"}, "text/plain or text/markdown"),
    ],
)
def test_supplied_chunks_that_do_not_make_the_text_are_refused(
    fields: dict[str, object], reason: str
) -> None:
    base = {"tenant": "shop", "library": "p", "document_id": "d", "title": ""}
    with pytest.raises(ValidationError, match=reason):
        DocumentAdded.model_validate({**base, **fields})


def test_supplied_matching_texts_travel_with_their_chunk_and_version_it() -> None:
    base = {"tenant": "shop", "library": "p", "document_id": "d", "title": ""}
    chunks = ("Kettle: boils water.", "Toaster: browns bread.")
    described = (("A kettle for tea.", "What boils water fast?"), ())
    doc = DocumentAdded.model_validate({**base, "chunks": chunks, "matching": described})
    ready = chunk_document(doc, _cutter(), 100)
    assert [c.matching for c in ready.chunks] == list(described)
    plain = DocumentAdded.model_validate({**base, "chunks": chunks})
    assert plain.effective_version() != doc.effective_version()


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"chunks": ("a", "b"), "matching": (("x",),)}, "one tuple per chunk"),
        ({"text": "a", "matching": (("x",),)}, "one tuple per chunk"),
        ({"chunks": ("a",), "matching": (("x",) * 9,)}, "the limit is 8"),
        ({"chunks": ("a",), "matching": ((" ",),)}, "empty or whitespace"),
        ({"chunks": ("a",), "matching": (("x" * 2_001,),)}, "at most 2000"),
    ],
)
def test_matching_texts_that_do_not_fit_their_chunks_are_refused(
    fields: dict[str, object], reason: str
) -> None:
    base = {"tenant": "shop", "library": "p", "document_id": "d", "title": ""}
    with pytest.raises(ValidationError, match=reason):
        DocumentAdded.model_validate({**base, **fields})


def test_a_sections_chunker_keeps_each_section_whole_up_to_its_limit() -> None:
    guide = (
        "# Guide\n\n## Returns\n\n" + "Returns are free within 30 days of delivery. " * 4 + "\n\n"
        "## Shipping\n\nParcels leave the same day.\n\n"
        "## Warranty\n\n" + "Repairs are free for two years. " * 30 + "\n"
    )
    doc = _doc(guide, ContentType.MARKDOWN)
    cutter = _cutter(kind="sections", max_chars=400, size=200, overlap=20)
    chunks = chunk_document(doc, cutter, 100).chunks
    returns, shipping, *warranty = chunks
    assert returns.heading_path == ("Guide", "Returns")
    # A section is its heading and its text, whole, though over the size.
    assert (
        returns.text
        == "## Returns\n\n" + ("Returns are free within 30 days of delivery. " * 4).strip()
    )
    assert shipping.text == "## Shipping\n\nParcels leave the same day."
    assert len(warranty) > 1  # over max_chars: cut by size
    assert all(c.heading_path == ("Guide", "Warranty") for c in warranty)
    assert not cutter.whole  # sections and pages stay scopes
