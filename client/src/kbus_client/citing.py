"""A context as a model reads it: numbered passages, each with its citation on one line."""

from __future__ import annotations

from kbus_contract import Citation, DegradedReason, Passage, SearchReply


def _pages(pages: tuple[int, ...]) -> str:
    if not pages:
        return ""
    if len(pages) == 1:
        return f", page {pages[0]}"
    return f", pages {pages[0]}-{pages[-1]}"


def citation_line(citation: Citation) -> str:
    """One line a person can find the passage by: title, document and version, section,
    pages, the characters it spans, and the source."""
    section = " > ".join(citation.heading_path)
    spans = "; ".join(f"{s.char_start}-{s.char_end}" for s in citation.spans)
    parts = [
        f'"{citation.title or citation.document_id}"',
        f"{citation.library}/{citation.document_id} version {citation.version}",
    ]
    if section:
        parts.append(f"section {section}")
    line = ", ".join(parts) + _pages(citation.pages) + f", characters {spans}"
    return line + (f", {citation.source_uri}" if citation.source_uri else "")


def passage_block(number: int, passage: Passage) -> str:
    """A passage numbered for citing, its citation on its first line."""
    cut = " (cut short by the budget)" if passage.cut else ""
    return (
        f"[{number}] {citation_line(passage.citation)} (score {passage.score:.3f}){cut}\n"
        f"{passage.text.strip()}"
    )


def format_context(reply: SearchReply, nothing: str) -> str:
    """The reply's passages for a model to read and cite; ``nothing`` says why there are none
    when the search found nothing."""
    context = reply.context
    if context is None or not context.passages:
        if not reply.results:
            return nothing
        return "Nothing more: this search gave every passage it found before this one."
    blocks = [passage_block(n, p) for n, p in enumerate(context.passages, 1)]
    tail = (
        f"({context.used_tokens} of {context.budget_tokens} tokens, counted with "
        f"{context.tokenizer}; {context.cut})"
    )
    if context.cursor:
        tail += f'\nMore passages: search again with the same query and cursor "{context.cursor}".'
    return degraded_note(reply) + "\n\n".join(blocks) + "\n\n" + tail


_DEGRADED = {
    DegradedReason.RERANK_OVER_BUDGET: "the reranker did not fit the time budget",
    DegradedReason.RERANK_TIMEOUT: "the reranker did not answer in time",
    DegradedReason.RERANK_UNAVAILABLE: "the reranker is unavailable",
    DegradedReason.RERANK_MALFORMED: "the reranker's answer could not be read",
    DegradedReason.REWRITE_FAILED: "the query rewriter failed",
    DegradedReason.REWRITE_UNAVAILABLE: "the query rewriter is unavailable",
}


def degraded_note(reply: SearchReply) -> str:
    """The line a degraded answer starts with (what was left out, and what that means), or
    "" for a full answer."""
    reason = reply.degraded_reason
    if not reply.degraded or reason is None:
        return ""
    rerank = reason.value.startswith("rerank")
    effect = "passages are in first-stage order" if rerank else "the query was searched as asked"
    return f"Note: a degraded answer ({reason.value}): {_DEGRADED[reason]}, so {effect}.\n\n"
