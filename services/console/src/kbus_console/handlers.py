"""The HTTP routes: each reads its request (a bounded JSON body, the path, the query), asks
:mod:`kbus_console.api` with the request's client, and answers JSON or a problem."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from kbus_client import CredentialFile, KbClient
from kbus_contract.errors import ErrorCode, KbusError, PermanentError
from kbus_contract.wire import describe_validation_error
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kbus_console import api
from kbus_console.openapi import openapi
from kbus_console.problems import UNAUTHORIZED, UNSUPPORTED, from_error, problem
from kbus_console.sessions import Sessions, UnauthorizedError

Asked = Callable[[KbClient], Awaitable[BaseModel | None]]


class Handlers:
    """The routes, over one pool of sessions."""

    def __init__(
        self, sessions: Sessions, max_body_bytes: int, registry: CollectorRegistry
    ) -> None:
        self.sessions = sessions
        self.max_body_bytes = max_body_bytes
        self.registry = registry

    def routes(self) -> list[Route]:
        return [
            Route("/health", self.health, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/openapi.json", self.schema, methods=["GET"]),
            Route("/v1/search", self.search, methods=["POST"]),
            Route("/v1/libraries", self.libraries, methods=["GET"]),
            Route("/v1/libraries/{library}", self.delete_library, methods=["DELETE"]),
            Route("/v1/libraries/{library}/documents", self.documents, methods=["GET"]),
            Route(
                "/v1/libraries/{library}/documents/{document_id:path}",
                self.document,
                methods=["PUT", "DELETE"],
            ),
            Route("/v1/libraries/{library}/files/{document_id:path}", self.file, methods=["PUT"]),
            Route("/v1/libraries/{library}/profile", self.profile, methods=["GET", "PUT"]),
            Route("/v1/libraries/{library}/sync", self.sync, methods=["POST"]),
            Route("/v1/libraries/{library}/progress", self.progress, methods=["GET"]),
            Route("/v1/backlog", self.backlog, methods=["GET"]),
            Route("/v1/dead-letters", self.dead_letters, methods=["GET"]),
            Route("/v1/dead-letters/{sequence:int}/replay", self.replay, methods=["POST"]),
        ]

    async def health(self, request: Request) -> Response:
        open_, busy = self.sessions.counts()
        return JSONResponse({"ok": True, "sessions": open_, "tenants_busy": busy})

    async def metrics(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

    async def schema(self, request: Request) -> Response:
        return JSONResponse(openapi())

    async def search(self, request: Request) -> Response:
        body = await self._body(request)
        return await self._answer(request, lambda kb: api.search(kb, body))

    async def libraries(self, request: Request) -> Response:
        principals = request.query_params.getlist("principal")
        return await self._answer(request, lambda kb: api.libraries(kb, principals))

    async def documents(self, request: Request) -> Response:
        library = request.path_params["library"]
        after = request.query_params.get("after")
        limit = _int(request.query_params.get("limit", "100"), "limit")
        principals = request.query_params.getlist("principal")
        filters = _json_object(request.query_params.get("filters"), "filters")
        return await self._answer(
            request, lambda kb: api.documents(kb, library, after, limit, principals, filters)
        )

    async def document(self, request: Request) -> Response:
        library, document_id = request.path_params["library"], request.path_params["document_id"]
        wait = _flag(request, "wait")
        if request.method == "DELETE":
            return await self._answer(
                request, lambda kb: api.delete(kb, library, document_id, wait=wait)
            )
        body = await self._body(request)
        interactive = _flag(request, "interactive")

        async def publish(kb: KbClient) -> BaseModel:
            return await api.publish(
                kb, library, document_id, body, wait=wait, interactive=interactive
            )

        return await self._answer(request, publish, status=201 if wait else 202)

    async def file(self, request: Request) -> Response:
        """A file's bytes as they are, its format from ``Content-Type`` (by claim check)."""
        library, document_id = request.path_params["library"], request.path_params["document_id"]
        data = await self._bytes(request)
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        wait = _flag(request, "wait")
        return await self._answer(
            request,
            lambda kb: api.publish_file(kb, library, document_id, data, kind, wait),
            status=201 if wait else 202,
        )

    async def profile(self, request: Request) -> Response:
        library = request.path_params["library"]
        change = None
        if request.method == "PUT":
            body = await self._body(request)
            try:
                change = api.ProfileChange.model_validate(body)
            except ValidationError as exc:
                raise BadRequestError(400, describe_validation_error(exc)) from exc
        return await self._answer(request, lambda kb: api.profile(kb, library, change))

    async def backlog(self, request: Request) -> Response:
        return await self._answer(request, api.backlog)

    async def sync(self, request: Request) -> Response:
        library, body = request.path_params["library"], await self._body(request)
        try:
            asked = api.SyncBody.model_validate(body)
        except ValidationError as exc:
            raise BadRequestError(400, describe_validation_error(exc)) from exc
        return await self._answer(request, lambda kb: api.sync(kb, library, asked))

    async def dead_letters(self, request: Request) -> Response:
        restricted = _restricted(request)
        return await self._answer(request, lambda kb: api.dead_letters(kb, restricted))

    async def replay(self, request: Request) -> Response:
        sequence, restricted = request.path_params["sequence"], _restricted(request)
        return await self._answer(
            request, lambda kb: api.replay(kb, sequence, restricted), status=202
        )

    async def progress(self, request: Request) -> Response:
        """A library's large documents' progress as server-sent events (``document.progress``
        as the indexer stores each part), for ``seconds`` (at most ten minutes)."""
        library = request.path_params["library"]
        seconds = min(_int(request.query_params.get("seconds", "60"), "seconds"), 600)
        authorization = request.headers.get("authorization")
        try:
            async with self.sessions.serving(authorization) as kb:
                await kb.stats()  # refused here, as a problem, if the token reaches nothing
        except UnauthorizedError as exc:
            return from_error(exc, UNAUTHORIZED)
        except KbusError as exc:
            return from_error(exc)

        async def events() -> AsyncIterator[bytes]:
            async with (
                self.sessions.serving(authorization) as kb,
                kb.progress_of(library) as told,
            ):
                yield b": following\n\n"
                ends = asyncio.get_running_loop().time() + seconds
                while (left := ends - asyncio.get_running_loop().time()) > 0:
                    try:
                        said = await asyncio.wait_for(told.get(), min(left, 15.0))
                    except TimeoutError:
                        yield b": still here\n\n"
                        continue
                    yield f"event: progress\ndata: {said.model_dump_json()}\n\n".encode()

        return StreamingResponse(events(), media_type="text/event-stream")

    async def delete_library(self, request: Request) -> Response:
        library, wait = request.path_params["library"], _flag(request, "wait")
        return await self._answer(request, lambda kb: api.delete(kb, library, None, wait=wait))

    async def _answer(self, request: Request, asked: Asked, status: int = 200) -> Response:
        """Ask with the request's client; the answer as JSON, or the problem that ended it."""
        try:
            async with self.sessions.serving(request.headers.get("authorization")) as kb:
                reply = await asked(kb)
        except UnauthorizedError as exc:
            return from_error(exc, UNAUTHORIZED)
        except KbusError as exc:
            return from_error(exc)
        except ValueError as exc:
            return problem(400, ErrorCode.INVALID, str(exc))
        except TimeoutError:
            return problem(
                504, ErrorCode.DEADLINE_EXCEEDED, "no answer in time: ask again", retryable=True
            )
        if reply is None:
            return Response(status_code=202)
        return Response(reply.model_dump_json(), status_code=status, media_type="application/json")

    async def _bytes(self, request: Request) -> bytes:
        """The request's body, read no further than the body limit."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body_bytes:
            raise _too_large(self.max_body_bytes)
        data = bytearray()
        async for piece in request.stream():
            data += piece
            if len(data) > self.max_body_bytes:
                raise _too_large(self.max_body_bytes)
        return bytes(data)

    async def _body(self, request: Request) -> dict[str, Any]:
        """The request's JSON object, read no further than the body limit."""
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise BadRequestError(UNSUPPORTED, "send the body as application/json")
        data = await self._bytes(request)
        try:
            body = json.loads(data)
        except ValueError as exc:
            raise BadRequestError(400, f"the body is not JSON: {exc}") from exc
        if not isinstance(body, dict):
            raise BadRequestError(400, "the body must be a JSON object")
        return body


class BadRequestError(PermanentError):
    """A request the console refuses before asking kbus (its status given)."""

    def __init__(self, status: int, reason: str, code: str = ErrorCode.INVALID) -> None:
        super().__init__(reason, code=code)
        self.status = status


def _too_large(limit: int) -> BadRequestError:
    return BadRequestError(413, f"the body is over {limit} bytes", ErrorCode.TOO_LARGE)


async def refused(request: Request, exc: Exception) -> Response:
    """A :class:`BadRequestError` as its problem (the app's handler for it)."""
    assert isinstance(exc, BadRequestError)
    return from_error(exc, exc.status)


async def no_route(request: Request, exc: Exception) -> Response:
    """A path or method the console does not serve, as a problem."""
    status = getattr(exc, "status_code", 404)
    said = "no such route" if status == 404 else f"{request.method} is not served here"
    return problem(status, ErrorCode.INVALID, f"{said}: {request.url.path} (see /openapi.json)")


def _restricted(request: Request) -> bool:
    """Whether the request's token reads the records of restricted documents too (a bad
    token is refused when the request is asked)."""
    token = request.headers.get("authorization", "").partition(" ")[2]
    try:
        return CredentialFile.from_token(token.strip()).names_restricted()
    except ValueError:
        return False


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "false").lower() in ("1", "true", "yes")


def _json_object(value: str | None, name: str) -> dict[str, Any] | None:
    if value is None:
        return None
    try:
        found = json.loads(value)
    except ValueError:
        found = None
    if not isinstance(found, dict):
        raise BadRequestError(400, f"{name} must be a JSON object")
    return found


def _int(value: str, name: str) -> int:
    if not value.isdigit():
        raise BadRequestError(400, f"{name} must be a whole number")
    return int(value)
