"""The committed AsyncAPI document is what the code generates, and it says what replies are."""

from __future__ import annotations

from pathlib import Path

import yaml
from kbus_dev.asyncapi import DEFAULT_PATH, render

ROOT = Path(__file__).resolve().parents[2]


def test_committed_document_matches_the_code() -> None:
    committed = (ROOT / DEFAULT_PATH).read_text()
    assert render() == committed, "docs/asyncapi.yaml is out of date: run `make docs`"


def test_request_reply_subjects_document_their_replies() -> None:
    doc = yaml.safe_load(render())
    operations = doc["operations"]
    search = operations["searcher:kb.search"]
    replies = {m["$ref"].rsplit("/", 1)[-1] for m in search["reply"]["messages"]}
    assert replies == {"SearchReply", "ErrorReply"}
    assert operations["reranker:kb.rerank"]["reply"]
    assert operations["embedder:kb.embed"]["reply"]
    payload = doc["components"]["schemas"]["SearchRequest"]
    assert {"tenant", "libraries", "query"} <= set(payload["required"])
    assert "ingestor:send:chunks.ready" in operations
    assert doc["channels"]["ingestor:document.added"]["messages"]["DocumentAdded"]


def test_the_configuration_page_matches_the_settings_classes() -> None:
    from kbus_dev.settings_doc import block

    assert block() in (ROOT / "docs/configuration.md").read_text(), "run `make docs`"
