"""The HTTP API's OpenAPI document, made from the contract's models (one fact: a field added
to ``SearchRequest`` is in the search body's schema without a word here)."""

from __future__ import annotations

from functools import cache
from typing import Any

from kbus_contract import (
    BacklogReply,
    DocumentAdded,
    DocumentRemoved,
    ProfileReply,
    SearchReply,
    SearchRequest,
    StatsReply,
)
from pydantic import BaseModel

from kbus_console.api import (
    FORMATS_BY_MEDIA,
    NAMED_BY_PATH,
    SET_BY_CONSOLE,
    Letters,
    ProfileChange,
    Published,
    StoredLetter,
    SyncBody,
    Synced,
)

REF = "#/components/schemas/{model}"
PROBLEM = {
    "type": "object",
    "description": "application/problem+json: kbus's error code and one sentence to act on.",
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "code": {"type": "string"},
        "retryable": {"type": "boolean"},
    },
    "required": ["status", "detail", "code", "retryable"],
}


def _schema(
    model: type[BaseModel],
    components: dict[str, Any],
    drop: tuple[str, ...] = (),
    optional: tuple[str, ...] = (),
) -> Any:
    """``model``'s schema as a component (without the fields in ``drop``, those in
    ``optional`` not required); its reference."""
    schema = model.model_json_schema(ref_template=REF, mode="serialization")
    components.update(schema.pop("$defs", {}))
    for name in drop:
        schema.get("properties", {}).pop(name, None)
    if "required" in schema:
        schema["required"] = [n for n in schema["required"] if n not in (*drop, *optional)]
    name = model.__name__ + ("Body" if drop else "")
    components[name] = schema
    return {"$ref": REF.format(model=name)}


def _operation(summary: str, ok: Any, body: Any = None, **extra: Any) -> dict[str, Any]:
    problem = {"application/problem+json": {"schema": {"$ref": REF.format(model="Problem")}}}
    operation: dict[str, Any] = {
        "summary": summary,
        "security": [{"token": []}],
        "responses": {
            "200": {"description": "OK", "content": {"application/json": {"schema": ok}}},
            "default": {"description": "A problem", "content": problem},
        },
        **extra,
    }
    if body is not None:
        content = {"application/json": {"schema": body}}
        operation["requestBody"] = {"required": True, "content": content}
    return operation


def _params(*names: str, query: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    path = [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]
    return path + [{"name": n, "in": "query", "schema": {"type": "string"}} for n in query]


@cache
def openapi() -> dict[str, Any]:
    """The document ``/openapi.json`` serves."""
    c: dict[str, Any] = {"Problem": PROBLEM}
    return {
        "openapi": "3.1.0",
        "info": {"title": "kbus", "version": "1"},
        "paths": {**_reads(c), **_writes(c)},
        "components": {
            "schemas": c,
            "securitySchemes": {
                "token": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A credential's token (kbus token --credential FILE): it "
                    "reaches exactly what the credential does, and ends with it.",
                }
            },
        },
    }


def _reads(c: dict[str, Any]) -> dict[str, Any]:
    """The paths that read (their schemas added to ``c``)."""
    stats = _schema(StatsReply, c)
    search_body = _schema(SearchRequest, c, SET_BY_CONSOLE, optional=("tenant",))
    stream = {"text/event-stream": {"schema": {"type": "string"}}}
    return {
        "/v1/search": {"post": _operation("Search", _schema(SearchReply, c), search_body)},
        "/v1/libraries": {
            "get": _operation(
                "The libraries the token reaches", stats, parameters=_params(query=("principal",))
            )
        },
        "/v1/libraries/{library}/documents": {
            "get": _operation(
                "A page of a library's documents",
                stats,
                parameters=_params("library", query=("after", "limit", "principal", "filters")),
            )
        },
        "/v1/libraries/{library}/progress": {
            "get": {
                "summary": "Large documents' progress as server-sent events",
                "security": [{"token": []}],
                "parameters": _params("library", query=("seconds",)),
                "responses": {
                    "200": {"description": "event: progress, data: a DocumentProgress"}
                    | {"content": stream}
                },
            }
        },
        "/v1/backlog": {
            "get": _operation(
                "The tenant's own work waiting at each stage", _schema(BacklogReply, c)
            )
        },
        "/v1/dead-letters": {"get": _operation("The tenant's dead letters", _schema(Letters, c))},
    }


def _writes(c: dict[str, Any]) -> dict[str, Any]:
    """The paths that change something (their schemas added to ``c``)."""
    removed, published = _schema(DocumentRemoved, c), _schema(Published, c)
    profile = _schema(ProfileReply, c)
    files: dict[str, Any] = {kind: {"schema": {}} for kind in sorted(FORMATS_BY_MEDIA)}
    return {
        "/v1/libraries/{library}": {
            "delete": _operation(
                "Delete a whole library", removed, parameters=_params("library", query=("wait",))
            )
        },
        "/v1/libraries/{library}/documents/{document_id}": {
            "put": _operation(
                "Publish a document (202; 201 with wait=true once searchable)",
                published,
                _schema(DocumentAdded, c, NAMED_BY_PATH, optional=("tenant",)),
                parameters=_params("library", "document_id", query=("wait", "interactive")),
            ),
            "delete": _operation(
                "Delete a document",
                removed,
                parameters=_params("library", "document_id", query=("wait",)),
            ),
        },
        "/v1/libraries/{library}/files/{document_id}": {
            "put": _operation(
                "Publish a file's bytes, its format from Content-Type",
                published,
                parameters=_params("library", "document_id", query=("wait",)),
                requestBody={"required": True, "content": files},
            )
        },
        "/v1/libraries/{library}/profile": {
            "get": _operation("A library's profile", profile, parameters=_params("library")),
            "put": _operation(
                "Set a library's profile (a sample cut with it)",
                profile,
                _schema(ProfileChange, c),
                parameters=_params("library"),
            ),
        },
        "/v1/libraries/{library}/sync": {
            "post": _operation(
                "Make a library hold exactly these documents (answered with the sync's receipt)",
                _schema(Synced, c),
                _schema(SyncBody, c),
                parameters=_params("library"),
            )
        },
        "/v1/dead-letters/{sequence}/replay": {
            "post": _operation(
                "Replay a dead letter (it leaves the list once its message is stored)",
                _schema(StoredLetter, c),
                parameters=_params("sequence"),
            )
        },
    }
