"""The attributes the client's spans carry (tenant, libraries, what a reply held)."""

from __future__ import annotations

from kbus_contract import DocumentAdded, SearchReply, SearchRequest


def document_attributes(doc: DocumentAdded) -> dict[str, str]:
    return {
        "kbus.tenant": doc.tenant,
        "kbus.library": doc.library,
        "kbus.document_id": doc.document_id,
        "kbus.version": doc.effective_version(),
    }


def search_attributes(asked: SearchRequest) -> dict[str, str | int | list[str]]:
    return {
        "kbus.tenant": asked.tenant,
        "kbus.libraries": list(asked.libraries),
        "kbus.search_type": asked.search_type.value,
        "kbus.budget_ms": asked.budget_ms or 0,
    }


def reply_attributes(reply: SearchReply) -> dict[str, str | int | bool]:
    return {
        "kbus.results": len(reply.results),
        "kbus.no_match": reply.no_match,
        "kbus.degraded": reply.degraded,
        "kbus.score_kind": reply.score_kind,
    }
