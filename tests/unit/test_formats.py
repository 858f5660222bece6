"""Document formats are declared once (kbus_contract.formats.FORMATS): the CLI's suffixes, the
fetcher's media types, the byte checks and the parsers all follow the one registry."""

from __future__ import annotations

from kbus_cli.files import SUFFIXES
from kbus_contract.formats import FORMATS, ContentType, by_extension, by_media_type
from kbus_ingestor.fetching import FETCHED_TYPES
from kbus_ingestor.parsing import OOXML_PART, PARSERS


def test_every_content_type_has_one_format_and_every_other_format_a_parser() -> None:
    assert set(FORMATS) == set(ContentType)
    for content_type, f in FORMATS.items():
        assert f.records or content_type in PARSERS, content_type
        assert not (f.records and f.binary), content_type
    assert set(PARSERS) == {ct for ct, f in FORMATS.items() if not f.records}


def test_each_file_ending_names_one_format() -> None:
    endings = [e for f in FORMATS.values() for e in f.extensions]
    assert len(endings) == len(set(endings))
    assert all(e.startswith(".") and e == e.lower() for e in endings)
    assert by_extension() == SUFFIXES
    assert {ct for ct in SUFFIXES.values()} == set(ContentType)


def test_what_is_fetched_and_what_is_unpacked_follow_the_registry() -> None:
    assert by_media_type() == FETCHED_TYPES
    assert {FETCHED_TYPES[ct.value] for ct in ContentType if ct.facts.fetched} == {
        ct for ct in ContentType if ct.facts.fetched
    }
    assert set(OOXML_PART) == {ct for ct, f in FORMATS.items() if f.archive_part}
    assert all(ct.binary for ct in OOXML_PART)
