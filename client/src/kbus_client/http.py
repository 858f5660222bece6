"""The client's surface over HTTP, for a caller that cannot reach NATS: :class:`HttpKbClient`
asks kbus's console (``python -m kbus_console``, docs/http.md) with a token made from a
credential, and answers as :class:`kbus_client.KbClient` does: the same typed replies and
errors (an error reply raises :class:`kbus_client.KbError` with kbus's code), so the agent tool
(:meth:`as_tool`) and the memory work over either transport.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Self, Unpack
from urllib.parse import quote

import httpx
from kbus_contract import (
    BacklogReply,
    DocumentEntry,
    DocumentIndexed,
    DocumentRemoved,
    MetadataScalar,
    SearchReply,
    StatsReply,
)
from kbus_contract.errors import ErrorCode, KbusError, PermanentError, TransientError

from kbus_client.credentials import CredentialFile
from kbus_client.memory import Memory
from kbus_client.results import PublishResult
from kbus_client.surface import DocumentFields, SearchOptions
from kbus_client.tool import KbTool, scoped_tool

#: Documents asked for per page when a listing is longer.
PAGE = 500


class HttpKbClient:
    """Search, publish, list and delete over HTTP, as the token's credential."""

    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.tenant = CredentialFile.from_token(token).tenant
        self.timeout_s = timeout_s
        self.http = httpx.AsyncClient(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def tenant_for(self, tenant: str | None = None) -> str:
        return tenant or self.tenant

    async def search(
        self,
        query: str,
        *,
        libraries: list[str] | tuple[str, ...],
        tenant: str | None = None,
        timeout_s: float | None = None,
        **options: Unpack[SearchOptions],
    ) -> SearchReply:
        """As :meth:`kbus_client.KbClient.search`."""
        chosen = {name: value for name, value in options.items() if value is not None}
        body = {**chosen, "query": query, "libraries": list(libraries)}
        if tenant:
            body["tenant"] = tenant
        answer = await self._ask("POST", "/v1/search", json=body, wait_s=timeout_s)
        return SearchReply.model_validate_json(answer.content)

    async def stats(self, *, principals: Sequence[str] = ()) -> StatsReply:
        answer = await self._ask("GET", "/v1/libraries", params={"principal": list(principals)})
        return StatsReply.model_validate_json(answer.content)

    async def backlog(self) -> BacklogReply:
        """As :meth:`kbus_client.KbClient.backlog` (the token's tenant)."""
        answer = await self._ask("GET", "/v1/backlog")
        return BacklogReply.model_validate_json(answer.content)

    async def library_names(
        self, *, tenant: str | None = None, principals: Sequence[str] = ()
    ) -> tuple[str, ...]:
        """As :meth:`kbus_client.KbClient.library_names` (the token's tenant)."""
        return tuple(lib.library for lib in (await self.stats(principals=principals)).libraries)

    async def publish_document(
        self,
        *,
        library: str,
        document_id: str,
        data: bytes | None = None,
        tenant: str | None = None,
        wait: bool = False,
        timeout_s: float = 300.0,
        interactive: bool = False,
        **fields: Unpack[DocumentFields],
    ) -> PublishResult:
        """As :meth:`kbus_client.KbClient.publish_document`: a file's ``data`` goes as its
        bytes, its format named by ``content_type``."""
        params = {"wait": str(wait).lower(), "interactive": str(interactive).lower()}
        wait_s = timeout_s + self.timeout_s if wait else None
        where = f"/v1/libraries/{_part(library)}"
        if data is not None:
            kind = str(fields.get("content_type") or "")
            if not kind:
                raise ValueError("a file's bytes need its content_type")
            answer = await self._ask(
                "PUT",
                f"{where}/files/{_part(document_id)}",
                content=data,
                headers={"content-type": kind},
                params={"wait": params["wait"]},
                wait_s=wait_s,
            )
        else:
            body: dict[str, Any] = {k: v for k, v in fields.items() if v is not None}
            if tenant:
                body["tenant"] = tenant
            answer = await self._ask(
                "PUT",
                f"{where}/documents/{_part(document_id)}",
                json=body,
                params=params,
                wait_s=wait_s,
            )
        told = answer.json()
        receipt = DocumentIndexed.model_validate(told["receipt"]) if told["receipt"] else None
        return PublishResult.told(told["document_id"], told["version"], receipt, told["duplicate"])

    async def documents(
        self,
        library: str,
        *,
        filters: dict[str, MetadataScalar | tuple[MetadataScalar, ...]] | None = None,
        limit: int = 100,
        tenant: str | None = None,
        principals: Sequence[str] = (),
        restricted: bool = False,
    ) -> tuple[DocumentEntry, ...]:
        """As :meth:`kbus_client.KbClient.documents`: up to ``limit``, page by page."""
        found: list[DocumentEntry] = []
        after: str | None = None
        while len(found) < limit:
            params: dict[str, Any] = {"limit": min(PAGE, limit - len(found))}
            params["principal"] = list(principals)
            if after:
                params["after"] = after
            if filters:
                params["filters"] = json.dumps(filters)
            answer = await self._ask(
                "GET", f"/v1/libraries/{_part(library)}/documents", params=params
            )
            page = StatsReply.model_validate_json(answer.content)
            found += page.documents
            if not page.after or not page.documents:
                break
            after = page.after
        return tuple(found[:limit])

    async def delete_document(
        self,
        *,
        library: str | None = None,
        document_id: str | None = None,
        tenant: str | None = None,
        wait: bool = False,
        timeout_s: float = 120.0,
    ) -> DocumentRemoved | None:
        """As :meth:`kbus_client.KbClient.delete_document`, of a document or a library (a
        whole tenant is deleted over NATS only)."""
        if library is None:
            raise ValueError("over HTTP, name the library to delete (or a document in it)")
        path = f"/v1/libraries/{_part(library)}"
        if document_id is not None:
            path += f"/documents/{_part(document_id)}"
        answer = await self._ask(
            "DELETE",
            path,
            params={"wait": str(wait).lower()},
            wait_s=timeout_s + self.timeout_s if wait else None,
        )
        if answer.status_code == 202:
            return None
        return DocumentRemoved.model_validate_json(answer.content)

    def memory(
        self,
        library: str,
        *,
        conversation: str,
        source: str = "agent",
        tenant: str | None = None,
        principals: Sequence[str] = (),
    ) -> Memory:
        """As :meth:`kbus_client.KbClient.memory`."""
        chosen = self.tenant_for(tenant)
        return Memory(self, library, conversation, source, chosen, tuple(principals))

    def as_tool(self, *, libraries: list[str] | tuple[str, ...], **options: Any) -> KbTool:
        """As :meth:`kbus_client.KbClient.as_tool`."""
        return scoped_tool(self, libraries=libraries, **options)

    async def _ask(
        self, method: str, path: str, *, wait_s: float | None = None, **kwargs: Any
    ) -> httpx.Response:
        """The answer, or kbus's error as :class:`KbError` (its code and sentence)."""
        try:
            answer = await self.http.request(
                method, path, timeout=wait_s or self.timeout_s, **kwargs
            )
        except httpx.TimeoutException as exc:
            raise TimeoutError(f"the console did not answer {method} {path} in time") from exc
        except httpx.HTTPError as exc:
            raise TransientError(
                f"cannot reach the console at {self.http.base_url}: {exc}",
                code=ErrorCode.UNAVAILABLE,
            ) from exc
        if answer.status_code < 400:
            return answer
        raise _error(answer)

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _error(answer: httpx.Response) -> KbusError:
    try:
        problem = answer.json()
        code, detail, retryable = problem["code"], problem["detail"], problem["retryable"]
    except (ValueError, KeyError, TypeError):
        code, retryable = str(ErrorCode.ERROR), answer.status_code >= 500
        detail = f"HTTP {answer.status_code}"
    kind = TransientError if retryable else PermanentError
    return kind(detail, code=code, stage="console")


def _part(name: str) -> str:
    """A name as one path segment."""
    return quote(name, safe="")
