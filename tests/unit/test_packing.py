"""Filling a token budget: merges, cuts at sentence boundaries, exact spans, the budget, and the
cursor (with the tokenizer the searcher counts with)."""

from __future__ import annotations

import random

import pytest
from kbus_contract import CutReason, Expand, Scores, SearchHit, SearchRequest
from kbus_contract.errors import PermanentError
from kbus_ingestor.chunking import ChunkingConfig
from kbus_searcher.search import cursors
from kbus_searcher.search.context import adaptive_cut
from kbus_searcher.search.highlighting import highlights
from kbus_searcher.search.packing import Block, Packer, cut, subtract, text_of
from kbus_searcher.search.tokens import TokenCounter

from tests.helpers import split_text

COUNTER = TokenCounter.load()
WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "zeta",
    "eta",
    "theta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "omicron",
]


def _document(seed: int, sentences: int = 60) -> str:
    rng = random.Random(seed)
    out = []
    for i in range(sentences):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 14)))
        out.append(f"Sentence {i} {words}.")
        if rng.random() < 0.15:
            out.append("\n\n")
    return " ".join(out).replace(" \n\n ", "\n\n")


def _blocks(text: str, size: int = 200, overlap: int = 40) -> list[Block]:
    spans = split_text(text, ChunkingConfig(size=size, overlap=overlap))
    return [Block(i, s.start, s.end, s.text) for i, s in enumerate(spans)]


def _hit(block: Block, score: float = 1.0, document: str = "d1") -> SearchHit:
    return SearchHit(
        chunk_id=f"{document}-{block.position}",
        document_id=document,
        library="lib",
        title="T",
        text=block.text,
        heading_path=block.heading_path,
        source_uri="",
        char_start=block.char_start,
        char_end=block.char_end,
        position=block.position,
        page=block.page,
        version="v1",
        metadata={},
        scores=Scores(final=score),
    )


def _pack(blocks: list[Block], order: list[int], budget: int, reach: int = 0) -> Packer:
    packer = Packer(COUNTER.count, budget, {})
    for p in order:
        region = [b for b in blocks if abs(b.position - p) <= reach]
        packer.add(_hit(blocks[p]), region)
        if packer.full:
            break
    return packer


def test_overlapping_hits_become_one_passage_with_no_text_twice() -> None:
    text = _document(1)
    blocks = _blocks(text)
    assert blocks[3].char_start < blocks[2].char_end  # the chunker overlaps them
    packer = _pack(blocks, [2, 3], budget=10_000)
    assert len(packer.drafts) == 1
    passage, pieces = packer.text(packer.drafts[0])
    assert pieces == [(blocks[2].char_start, blocks[3].char_end)]
    assert passage == text[blocks[2].char_start : blocks[3].char_end]
    assert [h.chunk_id for h in packer.drafts[0].hits] == ["d1-2", "d1-3"]


def test_hits_apart_are_passages_in_rank_order_and_touching_ones_merge() -> None:
    blocks = _blocks(_document(2), overlap=0)
    packer = _pack(blocks, [6, 1, 7, 2], budget=10_000)
    assert [d.rank for d in packer.drafts] == [1, 2]
    assert [[h.chunk_id for h in d.hits] for d in packer.drafts] == [
        ["d1-6", "d1-7"],
        ["d1-1", "d1-2"],
    ]


def test_neighbours_of_a_hit_already_given_extend_its_passage() -> None:
    text = _document(3)
    blocks = _blocks(text)
    packer = _pack(blocks, [5, 5], budget=10_000, reach=1)
    assert len(packer.drafts) == 1
    _, pieces = packer.text(packer.drafts[0])
    assert pieces == [(blocks[4].char_start, blocks[6].char_end)]


def test_what_does_not_fit_is_cut_at_a_sentence_boundary() -> None:
    text = _document(4)
    blocks = _blocks(text, size=2000)
    packer = _pack(blocks, [0], budget=60)
    draft = packer.drafts[0]
    passage, (piece,) = packer.text(draft)
    assert draft.cut is CutReason.BUDGET
    assert passage.endswith(".")
    assert text[piece[0] : piece[1]] == passage
    next_end = text.index(".", piece[1] + 1) + 1
    assert COUNTER.count(passage) <= 60 < COUNTER.count(text[piece[0] : next_end]) + 1


def test_a_cut_before_the_hit_keeps_the_sentences_nearest_it() -> None:
    text = "First one here. Second one here. Third one here."
    start, end, reason = cut(text, COUNTER.count("Third one here."), False, COUNTER.count)
    assert (text[start:end], reason) == ("Third one here.", CutReason.BUDGET)


def test_a_sentence_longer_than_what_is_left_is_cut_at_a_word() -> None:
    text = "one two three four five six seven eight nine ten."
    start, end, reason = cut(text, 3, True, COUNTER.count, words=True)
    assert (text[start:end], reason) == ("one two three", CutReason.WORD)
    assert cut(text, 3, True, COUNTER.count)[:2] == (0, 0)  # context is cut at sentences only


@pytest.mark.parametrize("seed", range(20))
def test_the_budget_is_never_exceeded_and_every_span_is_the_documents_text(seed: int) -> None:
    rng = random.Random(seed)
    text = _document(seed, sentences=120)
    blocks = _blocks(text, size=rng.choice([120, 300, 600]), overlap=rng.choice([0, 30]))
    budget = rng.choice([16, 64, 256, 1024])
    order = [rng.randrange(len(blocks)) for _ in range(20)]
    packer = _pack(blocks, order, budget, reach=rng.choice([0, 1, 3]))
    total = 0
    seen: list[tuple[int, int]] = []
    for draft in packer.drafts:
        passage, pieces = packer.text(draft)
        assert passage == "\n".join(text[a:b] for a, b in pieces)
        assert not subtract(seen, subtract(seen, pieces))  # no text twice
        seen += pieces
        total += COUNTER.count(passage)
    assert total <= budget


def test_a_cursor_gives_the_rest_and_nothing_twice() -> None:
    text = _document(5, sentences=200)
    blocks = _blocks(text)
    order = list(range(len(blocks)))
    random.Random(5).shuffle(order)
    req = SearchRequest(tenant="t", libraries=("lib",), query="q", budget_tokens=200)
    given: list[tuple[int, int]] = []
    taken = cursors.decode(req)
    for _ in range(100):
        packer = Packer(COUNTER.count, 200, taken)
        for p in order:
            if subtract(
                [(blocks[p].char_start, blocks[p].char_end)], taken.get(("lib", "d1", "v1"), [])
            ):
                packer.add(_hit(blocks[p]), [blocks[p]])
            if packer.full:
                break
        pieces = [piece for d in packer.drafts for piece in packer.text(d)[1]]
        if not pieces:
            break
        assert not subtract(given, subtract(given, pieces))
        given += pieces
        req = req.model_copy(update={"cursor": cursors.encode(req, packer.taken)})
        taken = cursors.decode(req)
    held = {i for a, b in given for i in range(a, b)}
    missing = [i for b in blocks for i in range(b.char_start, b.char_end) if i not in held]
    assert not "".join(text[i] for i in missing).strip()  # every word was given, once


def test_a_cursor_of_another_search_or_forged_is_refused() -> None:
    req = SearchRequest(tenant="t", libraries=("lib",), query="q", budget_tokens=200)
    cursor = cursors.encode(req, {("lib", "d1", "v1"): [(0, 10)]})
    other = req.model_copy(update={"query": "another", "cursor": cursor})
    # A forged cursor holding more spans than a page could ever be checked against.
    many = {("lib", "d1", "v1"): [(2 * i, 2 * i + 1) for i in range(cursors.MOST_SPANS + 1)]}
    heavy = req.model_copy(update={"cursor": cursors.encode(req, many)})
    for bad in (other, heavy, req.model_copy(update={"cursor": "garbage"})):
        with pytest.raises(PermanentError) as caught:
            cursors.decode(bad)
        assert caught.value.code == "bad_cursor"
    assert cursors.decode(req.model_copy(update={"cursor": cursor})) == {
        ("lib", "d1", "v1"): [(0, 10)]
    }


def test_context_fields_need_a_budget() -> None:
    with pytest.raises(ValueError, match="budget_tokens"):
        SearchRequest(tenant="t", libraries=("lib",), query="q", expand=Expand.SECTION)


def test_highlights_are_the_sentences_with_the_query_words_at_document_offsets() -> None:
    text = "Cats sleep a lot. Dogs bark at night. Cats and dogs play."
    found = highlights("cats dogs", [((100, 100 + len(text)), text)])
    assert [(h.char_start - 100, h.char_end - 100, h.score) for h in found] == [
        (38, 57, 1.0),
        (0, 17, 0.5),
        (18, 37, 0.5),
    ]
    assert text[found[0].char_start - 100 : found[0].char_end - 100] == "Cats and dogs play."


def test_the_adaptive_cut_is_a_share_of_the_spread_below_the_best() -> None:
    assert adaptive_cut([0.9, 0.5, 0.1], 0.5) == pytest.approx(0.5)


def test_text_of_reads_across_overlapping_blocks() -> None:
    text = _document(6)
    blocks = _blocks(text)
    a, b = blocks[1].char_start + 5, blocks[3].char_end - 5
    assert text_of(blocks, (a, b)) == text[a:b]


def test_a_highlight_is_a_whole_sentence_however_its_paragraph_is_wrapped() -> None:
    """Hard-wrapped text (lines broken at any width inside a sentence) gives the same
    highlights as the text on one line: a line break inside a paragraph ends no sentence."""
    import random
    import textwrap

    rng = random.Random(58)
    words = ["boiler", "key", "badge", "printer", "floor", "kettle", "desk", "visitor"]
    for _ in range(300):
        said = [
            " ".join(rng.choices(words, k=rng.randint(3, 20))).capitalize() + "." for _ in range(4)
        ]
        flat = " ".join(said)
        wrapped = textwrap.fill(flat, width=rng.randint(12, 70))
        query = " ".join(rng.sample(words, 2))
        one = highlights(query, [((0, len(flat)), flat)])
        other = highlights(query, [((0, len(wrapped)), wrapped)])
        as_flat = [flat[h.char_start : h.char_end] for h in one]
        as_wrapped = [" ".join(wrapped[h.char_start : h.char_end].split()) for h in other]
        assert as_wrapped == as_flat, (query, wrapped)


@pytest.mark.parametrize("seed", range(30))
def test_a_cut_counted_from_one_tokenization_is_the_cut_counted_piece_by_piece(seed: int) -> None:
    """A long region is tokenized once and its heads and tails counted from the offsets: the
    same cut as counting each candidate head or tail on its own, at every budget and side."""
    rng = random.Random(seed)
    text = _document(seed, sentences=rng.randint(5, 80))
    for _ in range(10):
        allowance = rng.randint(1, COUNTER.count(text))
        keep_head, words = rng.random() < 0.5, rng.random() < 0.5
        alone = cut(text, allowance, keep_head, COUNTER.count, words)
        once = cut(text, allowance, keep_head, COUNTER.count, words, COUNTER.offsets)
        assert once == alone, (allowance, keep_head, words)


@pytest.mark.parametrize("seed", range(30))
def test_a_long_region_is_packed_as_if_it_were_tokenized_whole(seed: int) -> None:
    """The packer decides what of a long region fits from a head or tail of it (and one
    tokenization): the same passages as counting every candidate piece whole."""
    rng = random.Random(seed)
    text = _document(seed, sentences=rng.choice([200, 600, 1500]))
    blocks = _blocks(text, size=rng.choice([200, 600]), overlap=rng.choice([0, 40]))
    budget = rng.choice([16, 64, 300, 1024, 4096])
    order = [rng.randrange(len(blocks)) for _ in range(rng.randint(1, 12))]
    reach = rng.choice([0, 3, 50, 10_000])
    whole = Packer(COUNTER.count, budget, {})
    windowed = Packer(COUNTER.count, budget, {}, COUNTER.offsets)
    for packer in (whole, windowed):
        for p in order:
            region = [b for b in blocks if abs(b.position - p) <= reach]
            packer.add(_hit(blocks[p]), region)
            if packer.full:
                break
    assert [(d.intervals, d.cut) for d in windowed.drafts] == [
        (d.intervals, d.cut) for d in whole.drafts
    ]
    assert windowed.used == whole.used
