"""Keyword analysis: the terms BM25 matches, made the same way at index and at query time.

Weaviate's word tokenizer lowercases and splits but never stems, so "inductive" never meets
"induction". kbus analyses text itself, as Lucene's English analyzer does (lowercase, split on
non-alphanumerics, drop Lucene's 33 English stop words, Porter stemming), and stores the result
in a whitespace-tokenized property. Queries go through the same function.

A chunk's keyword text covers a window around the chunk (its title and headings, and up to
``window`` characters of the document on each side): a term on a neighbouring line still counts
for the chunk, so a short document's chunks each carry the whole document's evidence.
"""

from __future__ import annotations

import bisect
import re
import threading
from collections.abc import Sequence
from typing import Any

ANALYZER = "en-porter-v1"

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET.
STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    ]
)
# Snowball's English stop words: the function words of a question ("how", "can", "my") that
# say nothing of its topic. Keyword search keeps them (Lucene's smaller list above); the
# no_match decision's keyword coverage counts only the other words.
FUNCTION_WORDS = STOPWORDS | frozenset(
    [
        "i",
        "me",
        "my",
        "myself",
        "we",
        "our",
        "ours",
        "ourselves",
        "you",
        "your",
        "yours",
        "yourself",
        "yourselves",
        "he",
        "him",
        "his",
        "himself",
        "she",
        "her",
        "hers",
        "herself",
        "its",
        "itself",
        "them",
        "theirs",
        "themselves",
        "what",
        "which",
        "who",
        "whom",
        "am",
        "were",
        "been",
        "being",
        "have",
        "has",
        "had",
        "having",
        "do",
        "does",
        "did",
        "doing",
        "because",
        "until",
        "while",
        "of",
        "about",
        "against",
        "between",
        "through",
        "during",
        "before",
        "after",
        "above",
        "below",
        "from",
        "up",
        "down",
        "out",
        "off",
        "over",
        "under",
        "again",
        "further",
        "once",
        "here",
        "when",
        "where",
        "why",
        "how",
        "all",
        "any",
        "both",
        "each",
        "few",
        "more",
        "most",
        "other",
        "some",
        "nor",
        "only",
        "own",
        "same",
        "so",
        "than",
        "too",
        "very",
        "s",
        "t",
        "can",
        "just",
        "don",
        "should",
        "now",
        "could",
        "would",
        "shall",
        "may",
        "might",
        "must",
        "also",
        "get",
        "got",
    ]
)
_TOKEN = re.compile(r"[^\W_]+")
_local = threading.local()


def _stemmer() -> Any:
    # PyStemmer objects are not thread-safe: one per thread.
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        import Stemmer

        stemmer = Stemmer.Stemmer("porter", 100_000)
        _local.stemmer = stemmer
    return stemmer


def analyze(text: str) -> str:
    """Stemmed, stop-word-free terms of ``text``, separated by spaces."""
    return " ".join(analyze_terms(text))


def analyze_terms(text: str) -> list[str]:
    """The terms of :func:`analyze`, one by one (a stem may be empty: Porter's of "s")."""
    return _terms_lowered(text.lower())


def content_terms(text: str) -> set[str]:
    """The stems of ``text``'s words that are not function words: what a query is about."""
    tokens = [t for t in _TOKEN.findall(text.lower()) if t not in FUNCTION_WORDS]
    return {stem for stem in _stemmer().stemWords(tokens) if stem}


def window_span(
    text: str, start: int, end: int, size: int, lo: int = 0, hi: int | None = None
) -> tuple[int, int]:
    """Where ``text[start:end]`` widened by up to ``size`` characters on each side, at word
    edges and inside ``text[lo:hi]``, begins and ends."""
    hi = len(text) if hi is None else hi
    begin = max(lo, start - size)
    stop = min(hi, end + size)
    # A cut inside a word would index a fragment of it: widen only to whole words.
    if begin > lo and not text[begin - 1].isspace():
        space = text.find(" ", begin, start)
        begin = space + 1 if space >= 0 else start
    if stop < hi and not text[stop].isspace():
        space = text.rfind(" ", end, stop)
        stop = space if space >= 0 else end
    return begin, stop


def keyword_text(title: str, heading_path: Sequence[str], context: str) -> str:
    """The analysed keyword text of a chunk: its title, headings and context window."""
    return analyze(" ".join((title, *heading_path, context)))


class TermIndex:
    """A text analysed once; the terms of any slice of it as :func:`analyze` gives them.

    The chunks of a document each analyse a window of up to twice the keyword window around
    them, so the same words were analysed several times over. When lowercasing the text maps
    each character to one (no capital sigma, whose lowercase depends on its neighbours, and no
    character that lowercases to two), a slice's terms are the stems of the text's tokens
    inside it and of the pieces of tokens at its edges; otherwise every slice is analysed on
    its own, as before.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        lowered = text.lower()
        self._exact = len(lowered) == len(text) and "\u03a3" not in text
        self._lowered = lowered
        self._starts: list[int] = []
        self._ends: list[int] = []
        self._stems: list[str | None] = []
        if self._exact:
            matches = list(_TOKEN.finditer(lowered))
            kept = [m.group() for m in matches if m.group() not in STOPWORDS]
            stems = iter(_stemmer().stemWords(kept))
            self._starts = [m.start() for m in matches]
            self._ends = [m.end() for m in matches]
            self._stems = [None if m.group() in STOPWORDS else next(stems) for m in matches]

    def terms(self, start: int, end: int) -> list[str]:
        """``analyze_terms(self.text[start:end])``."""
        if not self._exact:
            return analyze_terms(self.text[start:end])
        first = bisect.bisect_left(self._starts, start)
        last = bisect.bisect_right(self._ends, end)  # tokens first..last-1 lie inside
        if first >= last:
            return _terms_lowered(self._lowered[start:end])
        # The pieces before the first whole token and after the last one: parts of words cut
        # by the slice, or nothing.
        return [
            *_terms_lowered(self._lowered[start : self._starts[first]]),
            *(stem for stem in self._stems[first:last] if stem is not None),
            *_terms_lowered(self._lowered[self._ends[last - 1] : end]),
        ]


def _terms_lowered(text: str) -> list[str]:
    tokens = [t for t in _TOKEN.findall(text) if t not in STOPWORDS]
    stems: list[str] = _stemmer().stemWords(tokens)
    return stems
