"""Query styles made from a dataset's own documents (``kbus eval --style``)."""

from __future__ import annotations

from kbus_cli.styles import held_out, keyword_query, make_queries, paragraph_query, sentences

TEXT = (
    "Mitochondria produce most of the cell's energy. They carry their own genome. "
    "Damage to them is linked to ageing. Exercise increases their number in muscle."
)
CORPUS = {
    "d1": {"_id": "d1", "title": "Mitochondria and ageing", "text": TEXT},
    "d2": {"_id": "d2", "title": "Unjudged", "text": "Never asked about."},
}


def test_a_paragraph_is_every_other_sentence_so_no_single_chunk_holds_it() -> None:
    assert len(sentences(TEXT)) == 4
    assert paragraph_query(TEXT) == (
        "Mitochondria produce most of the cell's energy. Damage to them is linked to ageing."
    )
    assert paragraph_query("One sentence only.") == "One sentence only."


def test_keywords_are_content_words_of_the_text_the_same_every_run() -> None:
    query = keyword_query(TEXT, "d1")
    words = query.split()
    assert len(words) == 3
    assert all(w in TEXT.lower() for w in words)
    assert query == keyword_query(TEXT, "d1")
    assert not {"their", "most", "them"} & set(words)


def test_each_judged_document_gets_a_query_whose_relevant_document_is_itself() -> None:
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 2, "d3": 1}, "q3": {"d2": 0}}
    queries, judged, excluded = make_queries("title", CORPUS, qrels)
    # d3 is not in the corpus, d2 is judged irrelevant: only d1 is asked about.
    assert queries == {"title-d1": "Mitochondria and ageing"}
    assert judged == {"title-d1": {"d1": 1}}
    assert excluded == {}


def test_a_sibling_query_is_one_relevant_document_asking_for_the_others() -> None:
    corpus = {**CORPUS, "d3": {"_id": "d3", "title": "", "text": "Exercise builds mitochondria."}}
    qrels = {"q1": {"d1": 1, "d3": 1}, "q2": {"d2": 1}}
    queries, judged, excluded = make_queries("sibling", corpus, qrels)
    assert queries == {"sibling-q1-d1": TEXT, "sibling-q1-d3": "Exercise builds mitochondria."}
    assert judged == {"sibling-q1-d1": {"d3": 1}, "sibling-q1-d3": {"d1": 1}}
    assert excluded == {"sibling-q1-d1": ("d1",), "sibling-q1-d3": ("d3",)}


def test_off_topic_sets_split_into_halves_that_never_overlap() -> None:
    lines = [f"line {i}" for i in range(6)]
    train, test = held_out(lines, "train"), held_out(lines, "test")
    assert train == ["line 0", "line 2", "line 4"]
    assert test == ["line 1", "line 3", "line 5"]
    assert held_out(lines, "dev") == lines
