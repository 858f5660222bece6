"""Keyword analysis: the same terms at index and at query time."""

from __future__ import annotations

from kbus_shared.analysis import analyze, keyword_text, window


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
    assert window(text, start, end, 0) == "delta"
    assert window(text, start, end, 8) == "gamma delta epsilon"
    assert window(text, start, end, 5) == "delta"
    assert window(text, start, end, 1000) == text


def test_keyword_text_includes_title_and_headings() -> None:
    assert keyword_text("Guide", ("Install", "Linux"), "systemd units") == (
        "guid instal linux systemd unit"
    )
