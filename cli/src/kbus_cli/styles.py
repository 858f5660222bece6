"""Query styles made from a dataset's own documents, for measuring beyond its question style.

A BEIR split's queries are written in one style (SciFact's are claims). Users ask in others, so
``kbus eval --style`` makes queries from the documents the split judges relevant, each query's
own document being the relevant one:

- ``title``: the document's title, a short keyword query;
- ``keywords``: a few content words drawn from its text (seeded, so the same every run);
- ``paragraph``: every other sentence of its text, a whole paragraph that no single chunk holds;
- ``sibling``: the whole text of a document as the query, where a query of the split judges two
  or more documents relevant: the others are the answers (the document itself is excluded), so
  a document must be matched as a whole against another, not a sentence against its copy.

``question`` is the split's own queries. Off-topic sets of each style are files of one query
per line (``tests/data/off_topic_<style>.txt``).
"""

from __future__ import annotations

import random
import re

STYLES = ("question", "title", "keywords", "paragraph", "sibling")
#: The off-topic set of each style, in tests/data.
OFF_TOPIC = {
    "question": "off_topic_questions.txt",
    "title": "off_topic_titles.txt",
    "keywords": "off_topic_keywords.txt",
    "paragraph": "off_topic_paragraphs.txt",
    "sibling": "off_topic_paragraphs.txt",
}
KEYWORDS = 3

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_WORD = re.compile(r"[A-Za-z][A-Za-z-]{3,}")
_COMMON = frozenset(
    [
        "also",
        "although",
        "among",
        "based",
        "both",
        "could",
        "does",
        "each",
        "from",
        "have",
        "here",
        "however",
        "into",
        "many",
        "more",
        "most",
        "much",
        "must",
        "only",
        "other",
        "over",
        "same",
        "should",
        "some",
        "such",
        "than",
        "that",
        "their",
        "them",
        "then",
        "there",
        "these",
        "they",
        "this",
        "those",
        "through",
        "thus",
        "under",
        "upon",
        "very",
        "were",
        "what",
        "when",
        "where",
        "whether",
        "which",
        "while",
        "will",
        "with",
        "within",
        "without",
        "would",
        "been",
        "being",
        "between",
        "after",
        "before",
        "during",
        "further",
        "using",
        "used",
        "show",
        "shown",
        "found",
        "results",
        "result",
        "study",
        "studies",
        "data",
        "including",
        "levels",
        "level",
        "patients",
        "increased",
        "associated",
        "role",
        "effect",
        "effects",
    ]
)


def sentences(text: str) -> list[str]:
    """The text's sentences (a simple split at sentence ends)."""
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def paragraph_query(text: str) -> str:
    """Every other sentence of ``text`` (its first, third, ...): the document's gist spread over
    all its chunks; a text of one or two sentences is its own paragraph."""
    found = sentences(text)
    if len(found) <= 2:
        return text.strip()
    return " ".join(found[::2])


def keyword_query(text: str, key: str, count: int = KEYWORDS) -> str:
    """``count`` content words of ``text``, drawn with a seed of ``key``, in the text's order."""
    seen: dict[str, int] = {}
    for match in _WORD.finditer(text):
        word = match.group().lower()
        if word not in _COMMON and word not in seen:
            seen[word] = match.start()
    words = sorted(seen)
    chosen = random.Random(key).sample(words, min(count, len(words)))
    return " ".join(sorted(chosen, key=seen.__getitem__))


Queries = dict[str, str]
Qrels = dict[str, dict[str, int]]
Excluded = dict[str, tuple[str, ...]]


def make_queries(
    style: str, corpus: dict[str, dict[str, str]], qrels: Qrels
) -> tuple[Queries, Qrels, Excluded]:
    """Queries of ``style``, their qrels, and the documents each must not return."""
    if style not in STYLES or style == "question":
        raise ValueError(f"style {style!r}: make_queries takes one of {STYLES[1:]}")
    if style == "sibling":
        return _siblings(corpus, qrels)
    queries: Queries = {}
    for doc_id in _relevant(qrels):
        doc = corpus.get(doc_id)
        if doc is None:
            continue
        text = doc.get("text", "")
        query = {
            "title": doc.get("title", "").strip(),
            "keywords": keyword_query(text, doc_id),
            "paragraph": paragraph_query(text),
        }[style]
        if query:
            queries[f"{style}-{doc_id}"] = query
    return queries, {qid: {qid.split("-", 1)[1]: 1} for qid in queries}, {}


def _relevant(qrels: Qrels) -> list[str]:
    return sorted({d for judged in qrels.values() for d, grade in judged.items() if grade > 0})


def _siblings(corpus: dict[str, dict[str, str]], qrels: Qrels) -> tuple[Queries, Qrels, Excluded]:
    queries: Queries = {}
    judged: Qrels = {}
    excluded: Excluded = {}
    for query_id, grades in sorted(qrels.items()):
        relevant = sorted(d for d, g in grades.items() if g > 0 and d in corpus)
        for doc_id in relevant if len(relevant) >= 2 else []:
            qid = f"sibling-{query_id}-{doc_id}"
            queries[qid] = corpus[doc_id].get("text", "").strip()
            judged[qid] = {d: grades[d] for d in relevant if d != doc_id}
            excluded[qid] = (doc_id,)
    return queries, judged, excluded


def held_out(lines: list[str], split: str) -> list[str]:
    """The half of an off-topic set that belongs to a split: the first, third, ... line to train,
    the second, fourth, ... to test (choices are made on train's half; test's is read once).
    Any other split takes every line."""
    if split not in ("train", "test"):
        return lines
    return lines[0 if split == "train" else 1 :: 2]
