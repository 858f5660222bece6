"""The chunker: boundaries, overlap, offsets, heading paths and awkward input."""

from __future__ import annotations

import itertools

import pytest
from kbus_contract import ContentType, DocumentAdded
from kbus_contract.errors import PermanentError
from kbus_ingestor.chunking import ChunkingConfig
from kbus_ingestor.markdown import sections
from kbus_ingestor.profiling import Cutter

from tests.cutting import chunk_document
from tests.helpers import split_text

CONFIG = ChunkingConfig(size=512, overlap=50)
CUTTER = Cutter.recursive(CONFIG)


def _sentence(i: int) -> str:
    return f"Sentence number {i} talks about topic {i % 7} in some detail."


def _doc(text: str, content_type: ContentType = ContentType.PLAIN, **kw: object) -> DocumentAdded:
    fields = {
        "tenant": "acme",
        "library": "docs",
        "document_id": "d1",
        "title": "T",
        "text": text,
        "content_type": content_type,
        **kw,
    }
    return DocumentAdded.model_validate(fields)


def test_short_text_is_one_chunk_with_exact_offsets() -> None:
    text = "  Hello world.  \n"
    [span] = split_text(text, CONFIG)
    assert span.text == "Hello world."
    assert text[span.start : span.end] == span.text


def test_offsets_slice_back_to_chunk_text_and_cover_everything() -> None:
    text = "\n\n".join(" ".join(_sentence(p * 10 + i) for i in range(6)) for p in range(12))
    spans = split_text(text, CONFIG)
    assert len(spans) > 5
    for span in spans:
        assert text[span.start : span.end] == span.text
        assert len(span.text) <= CONFIG.size
    # Every non-space character is in some chunk.
    covered: set[int] = set()
    for span in spans:
        covered.update(range(span.start, span.end))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())


def test_prefers_paragraph_then_line_then_sentence_boundaries() -> None:
    para = " ".join(_sentence(i) for i in range(5))  # ~300 chars
    text = para + "\n\n" + para + "\n\n" + para
    spans = split_text(text, CONFIG)
    # A chunk ends at the end of a paragraph, not mid-paragraph, when one is in reach.
    assert spans[0].text == para

    lines = "\n".join(_sentence(i) for i in range(20))
    first = split_text(lines, CONFIG)[0]
    assert lines[first.end] == "\n"

    sentences = " ".join(_sentence(i) for i in range(20))
    first = split_text(sentences, CONFIG)[0]
    assert first.text.endswith(".")


def test_never_cuts_mid_word() -> None:
    words = " ".join(f"word{i}" for i in range(400))
    for span in split_text(words, CONFIG):
        assert span.start == 0 or words[span.start - 1] == " "
        assert span.end == len(words) or words[span.end] == " "


def test_overlap_is_about_fifty_characters_at_a_word_start() -> None:
    words = " ".join(f"w{i:03d}" for i in range(600))
    spans = split_text(words, CONFIG)
    for prev, nxt in itertools.pairwise(spans):
        overlap = prev.end - nxt.start
        assert 0 < overlap <= CONFIG.overlap
        assert overlap >= CONFIG.overlap - 6  # one word of slack
        assert words[nxt.start - 1] == " "


def test_single_long_word_is_cut_only_because_it_must_be() -> None:
    word = "x" * 2000
    spans = split_text(f"start {word} end", CONFIG)
    assert spans[0].text == "start"
    # The word is cut into consecutive pieces with no overlap (there is no word start to use).
    assert "".join(s.text.removesuffix(" end") for s in spans[1:]) == word
    assert all(len(s.text) <= CONFIG.size for s in spans)
    assert spans[-1].text.endswith("x end")
    assert sum(1 for s in spans if len(s.text) == CONFIG.size) == 3


def test_unicode_offsets_are_code_points() -> None:
    text = "Ünïcödé 🚀 naïve café. " * 60 + "終わり。"
    spans = split_text(text, CONFIG)
    for span in spans:
        assert text[span.start : span.end] == span.text
    assert spans[-1].text.endswith("終わり。")


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t  \n"])
def test_empty_or_whitespace_only_text_gives_no_chunks(text: str) -> None:
    assert split_text(text, CONFIG) == []


def test_empty_document_is_rejected_with_a_reason() -> None:
    with pytest.raises(ValueError, match="empty or whitespace"):
        _doc("   \n ")


def test_markdown_heading_paths() -> None:
    text = (
        "# Guide\nIntro.\n\n## Install\nGeneral.\n\n### Linux\nUse apt.\n\n"
        "### macOS\nUse brew.\n\n## Configure\n```\n# not a heading\n```\nEdit the file.\n"
    )
    paths = [s.heading_path for s in sections(text)]
    assert paths == [
        ("Guide",),
        ("Guide", "Install"),
        ("Guide", "Install", "Linux"),
        ("Guide", "Install", "macOS"),
        ("Guide", "Configure"),
    ]
    ready = chunk_document(_doc(text, ContentType.MARKDOWN), CUTTER, max_chunks=100)
    linux = next(c for c in ready.chunks if "apt" in c.text)
    assert linux.heading_path == ("Guide", "Install", "Linux")
    assert text[linux.char_start : linux.char_end] == linux.text
    assert "# not a heading" in ready.chunks[-1].text


def test_text_before_the_first_heading_has_an_empty_path() -> None:
    assert sections("Preface.\n# One\nBody\n")[0].heading_path == ()


def test_chunk_ids_are_deterministic_and_depend_on_version_and_position() -> None:
    text = " ".join(_sentence(i) for i in range(40))
    first = chunk_document(_doc(text), CUTTER, 100)
    again = chunk_document(_doc(text), CUTTER, 100)
    assert [c.chunk_id for c in first.chunks] == [c.chunk_id for c in again.chunks]
    assert len({c.chunk_id for c in first.chunks}) == len(first.chunks)
    changed = chunk_document(_doc(text + " More."), CUTTER, 100)
    assert changed.document.version != first.document.version
    assert changed.chunks[0].chunk_id != first.chunks[0].chunk_id
    pinned = chunk_document(_doc(text, version="v7"), CUTTER, 100)
    assert pinned.document.version == "v7"


def test_too_many_chunks_is_a_permanent_error() -> None:
    text = " ".join(_sentence(i) for i in range(200))
    with pytest.raises(PermanentError) as info:
        chunk_document(_doc(text), CUTTER, max_chunks=3)
    assert info.value.code == "too_large"


def test_config_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="overlap"):
        ChunkingConfig(size=100, overlap=60)


def test_a_heading_with_only_subheadings_makes_no_chunk_of_its_own() -> None:
    text = "# Errors\n\n## E1\nFirst.\n\n## E2\nSecond.\n"
    ready = chunk_document(_doc(text, ContentType.MARKDOWN), CUTTER, max_chunks=10)
    assert [c.heading_path for c in ready.chunks] == [("Errors", "E1"), ("Errors", "E2")]
    only_title = chunk_document(_doc("# Title\n", ContentType.MARKDOWN), CUTTER, max_chunks=10)
    assert [c.text for c in only_title.chunks] == ["# Title"]


def test_a_keyword_window_stays_inside_its_markdown_section() -> None:
    text = "# Install\n\nPick a section.\n\n## Linux\n\nEnable the systemd unit.\n"
    ready = chunk_document(_doc(text, ContentType.MARKDOWN), CUTTER, 100)
    by_path = {c.heading_path: c.keywords for c in ready.chunks}
    assert "systemd" not in by_path[("Install",)]
    assert "systemd" in by_path[("Install", "Linux")]
    plain = chunk_document(_doc("Pick a section.\n\nEnable the systemd unit."), CUTTER, 100)
    assert all("systemd" in c.keywords for c in plain.chunks)
