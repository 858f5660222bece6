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
    tokens = [t for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]
    stems: list[str] = _stemmer().stemWords(tokens)
    return " ".join(stems)


def window(text: str, start: int, end: int, size: int) -> str:
    """``text[start:end]`` widened by up to ``size`` characters on each side, at word edges."""
    begin = max(0, start - size)
    stop = min(len(text), end + size)
    # A cut inside a word would index a fragment of it: widen only to whole words.
    if begin > 0 and not text[begin - 1].isspace():
        space = text.find(" ", begin, start)
        begin = space + 1 if space >= 0 else start
    if stop < len(text) and not text[stop].isspace():
        space = text.rfind(" ", end, stop)
        stop = space if space >= 0 else end
    return text[begin:stop]


def keyword_text(title: str, heading_path: Sequence[str], context: str) -> str:
    """The analysed keyword text of a chunk: its title, headings and context window."""
    return analyze(" ".join((title, *heading_path, context)))
