"""Keyword analysis: the same terms at index and at query time."""

from __future__ import annotations

import random

from kbus_runtime.analysis import TermIndex, analyze, keyword_text, window_span


def test_analyze_lowercases_drops_stop_words_and_stems() -> None:
    assert analyze("The Inductive properties of 0-dimensional biomaterials") == (
        "induct properti of 0 dimension biomateri"
    )


def test_inflections_meet() -> None:
    assert analyze("induction") == analyze("inductive")
    assert analyze("mapping genes") == analyze("maps gene")


def test_only_stop_words_or_punctuation_leave_nothing() -> None:
    assert analyze("the and, or!") == ""
    assert analyze("") == ""


def test_underscores_split_like_weaviate_word_tokens() -> None:
    assert analyze("snake_case WX-4471") == "snake case wx 4471"


def test_window_widens_to_word_edges() -> None:
    text = "alpha beta gamma delta epsilon zeta eta theta"
    start = text.index("delta")
    end = start + len("delta")

    def window(size: int) -> str:
        begin, stop = window_span(text, start, end, size)
        return text[begin:stop]

    assert window(0) == "delta"
    assert window(8) == "gamma delta epsilon"
    assert window(5) == "delta"
    assert window(1000) == text


def test_keyword_text_includes_title_and_headings() -> None:
    assert keyword_text("Guide", ("Install", "Linux"), "systemd units") == (
        "guid instal linux systemd unit"
    )


def test_a_term_index_gives_each_slice_the_terms_analyze_gives_it() -> None:
    rng = random.Random(7)
    # Words, stop words, digits, underscores, and characters whose lowercase is not one
    # character of its own: capital sigma (final or not), dotted capital I, the ligature fi
    # (one character either way), a combining dot, sharp s.
    pieces = [
        "Inductive",
        "the",
        "and",
        "cells",
        "p53",
        "WX-4471",
        "snake_case",
        "ΟΔΟΣ",
        "Σίσυφος",
        "İstanbul",
        "ﬁnal",
        "e\u0307",
        "Straße",
        "STRASSE",
        "ẞ",
        "naïve",
        "x",
        "ALL",
        "a",
    ]
    separators = [" ", " ", " ", "\n", "\n\n", ", ", ". ", "-", "_", "/", ""]
    for _ in range(300):
        words = rng.choices(pieces, k=rng.randint(0, 30))
        text = "".join(w + rng.choice(separators) for w in words)
        index = TermIndex(text)
        for _ in range(20):
            start = rng.randint(0, len(text))
            end = rng.randint(start, len(text))
            assert " ".join(index.terms(start, end)) == analyze(text[start:end]), (text, start, end)


def test_the_term_index_analyses_once_where_lowercase_keeps_places() -> None:
    assert TermIndex("Cells divide. The end")._exact
    assert not TermIndex("ΟΔΟΣ")._exact  # sigma: its lowercase depends on its neighbours
    assert not TermIndex("İstanbul")._exact  # lowercases to two characters
