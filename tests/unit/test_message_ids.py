"""A publish's Nats-Msg-Id: the same for a re-send, unguessable by anyone else."""

from __future__ import annotations

from kbus_client.msgids import MessageIds
from kbus_contract import DocumentAdded


def _doc(text: str = "one", document_id: str = "d1", url: str | None = None) -> DocumentAdded:
    return DocumentAdded(
        tenant="t1", library="lib", document_id=document_id, title="T", text=text, url=url
    )


def test_an_identical_publish_keeps_its_id_and_a_change_gets_a_new_one() -> None:
    ids = MessageIds()
    first = ids.for_publish(_doc())
    assert ids.for_publish(_doc()) == first
    assert ids.for_publish(_doc("two")) != first
    assert ids.for_publish(_doc(document_id="d2")) != first


def test_the_id_is_not_the_document_s_own() -> None:
    doc = _doc()
    assert doc.message_id() not in {MessageIds().for_publish(doc) for _ in range(3)}
    assert len({MessageIds().for_publish(doc) for _ in range(3)}) == 3  # another client: new


def test_after_a_deletion_or_for_a_page_fetched_again_the_id_is_new() -> None:
    ids = MessageIds()
    first = ids.for_publish(_doc())
    ids.deleted("t1", "lib", None)
    assert ids.for_publish(_doc()) != first
    page = _doc(text="", url="https://example.org/a")
    assert ids.for_publish(page) != ids.for_publish(page)
