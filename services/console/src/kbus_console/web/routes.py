"""The web console's routes: sign in with a token, the libraries, a library's documents with
search, import and delete. Each page asks kbus through the same sessions (and so the same
credential, gate, budgets and scoped view) as the API; every form that changes anything
carries the sign-in's CSRF token, and the cookie is ``HttpOnly`` and ``SameSite=Strict``."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar
from urllib.parse import quote

from kbus_client import CredentialFile, KbClient
from kbus_client.replays import ReplayError
from kbus_contract import ContentType, LibraryProfile, StatsReply
from kbus_contract.errors import KbusError
from kbus_contract.formats import by_extension
from kbus_contract.identifiers import document_id_of
from kbus_contract.wire import describe_validation_error
from pydantic import ValidationError
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from kbus_console import api
from kbus_console.sessions import Sessions
from kbus_console.web import pages
from kbus_console.web.signins import COOKIE, SignIn, SignIns, csrf_ok

T = TypeVar("T")
TEXT = {ContentType.PLAIN, ContentType.MARKDOWN}
#: Files of one import published at once.
IMPORTS_AT_ONCE = 2
#: Seconds an import waits for its documents to be searchable before it says they are on the way.
IMPORT_WAIT_S = 120.0


class Console:
    """The pages, over the API's sessions."""

    def __init__(self, sessions: Sessions, signins: SignIns, max_body_bytes: int) -> None:
        self.sessions = sessions
        self.signins = signins
        self.max_body_bytes = max_body_bytes

    def routes(self) -> list[Route]:
        return [
            Route("/", self.home, methods=["GET"]),
            Route("/console.css", self.style, methods=["GET"]),
            Route("/sign-in", self.sign_in, methods=["POST"]),
            Route("/sign-out", self.sign_out, methods=["POST"]),
            Route("/open", self.open_library, methods=["GET"]),
            Route("/libraries/{library}", self.library, methods=["GET"]),
            Route("/libraries/{library}/import", self.import_files, methods=["POST"]),
            Route(
                "/libraries/{library}/documents/{document_id:path}/delete",
                self.delete,
                methods=["POST"],
            ),
            Route("/libraries/{library}/profile", self.profile, methods=["GET", "POST"]),
            Route("/dead-letters", self.dead_letters, methods=["GET"]),
            Route("/dead-letters/{sequence:int}/replay", self.replay, methods=["POST"]),
        ]

    async def style(self, request: Request) -> Response:
        return Response(pages.STYLE, media_type="text/css")

    async def home(self, request: Request) -> Response:
        held = self.signins.of(request.cookies.get(COOKIE))
        if held is None:
            return _html(pages.sign_in())
        try:
            stats = await self._ask(held, lambda kb: kb.stats())
        except KbusError as exc:
            return _html(pages.sign_in(exc.reason), 401)
        return _html(pages.libraries(stats, held.csrf))

    async def sign_in(self, request: Request) -> Response:
        token = str((await request.form()).get("token", "")).strip()
        held = SignIn(token)
        try:
            stats = await self._ask(held, lambda kb: kb.stats())
        except KbusError as exc:
            return _html(pages.sign_in(exc.reason), 401)
        cookie = self.signins.start(token, stats.tenant)
        answer = RedirectResponse("/", status_code=303)
        answer.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", path="/")
        return answer

    async def sign_out(self, request: Request) -> Response:
        held = await self._posted(request)
        if isinstance(held, Response):
            return held
        self.signins.end(request.cookies.get(COOKIE))
        answer = RedirectResponse("/", status_code=303)
        answer.delete_cookie(COOKIE, path="/")
        return answer

    async def open_library(self, request: Request) -> Response:
        name = request.query_params.get("library", "")
        return RedirectResponse(f"/libraries/{quote(name, safe='')}", status_code=303)

    async def library(self, request: Request, said: tuple[str, ...] = ()) -> Response:
        held = self.signins.of(request.cookies.get(COOKIE))
        if held is None:
            return RedirectResponse("/", status_code=303)
        name, query = request.path_params["library"], request.query_params.get("q", "")
        after = request.query_params.get("after")
        try:
            listing = await self._ask(held, lambda kb: kb.document_page(name, after=after))
            reply = None
            if query:
                reply = await self._ask(held, lambda kb: kb.search(query, libraries=[name]))
        except KbusError as exc:
            empty = StatsReply(tenant="", libraries=())
            return _html(pages.library(name, empty, held.csrf, error=exc.reason), 403)
        return _html(pages.library(name, listing, held.csrf, said=said, query=query, reply=reply))

    async def import_files(self, request: Request) -> Response:
        held = await self._posted(request, keep_form=True)
        if isinstance(held, Response):
            return held
        signin, form = held
        name = request.path_params["library"]
        files = [f for f in form.getlist("files") if isinstance(f, UploadFile) and f.filename]
        url = str(form.get("url") or "").strip()
        sources = [await _from_file(f) for f in files]
        if url:
            sources.append((url.split("://", 1)[-1][:256].rstrip("/") or url, {"url": url}))
        said = await self._publish(signin, name, sources)
        return await self.library(request, tuple(said))

    async def delete(self, request: Request) -> Response:
        held = await self._posted(request)
        if isinstance(held, Response):
            return held
        name, doc = request.path_params["library"], request.path_params["document_id"]
        try:
            await self._ask(
                held, lambda kb: kb.delete_document(library=name, document_id=doc, wait=True)
            )
        except (KbusError, TimeoutError) as exc:
            return await self.library(request, (f"{doc} was not deleted: {exc}",))
        return await self.library(request, (f"deleted {doc}",))

    async def dead_letters(self, request: Request, said: tuple[str, ...] = ()) -> Response:
        held = self.signins.of(request.cookies.get(COOKIE))
        if held is None:
            return RedirectResponse("/", status_code=303)
        try:
            found = await self._ask(held, lambda kb: api.dead_letters(kb, _restricted(held)))
            letters = [(s.sequence, s.letter) for s in found.letters]
        except KbusError as exc:
            return _html(pages.dead_letters([], held.csrf, (exc.reason,)), 403)
        return _html(pages.dead_letters(letters, held.csrf, said))

    async def replay(self, request: Request) -> Response:
        held = await self._posted(request)
        if isinstance(held, Response):
            return held
        sequence = request.path_params["sequence"]

        async def send(kb: KbClient) -> str:
            sent = await api.replay(kb, sequence, _restricted(held))
            return f"replayed dead letter {sequence} ({sent.letter.document_id})"

        try:
            said = await self._ask(held, send)
        except (KbusError, ReplayError) as exc:
            said = f"dead letter {sequence} was not replayed: {exc}"
        return await self.dead_letters(request, (said,))

    async def profile(self, request: Request) -> Response:
        held = self.signins.of(request.cookies.get(COOKIE))
        name = request.path_params["library"]
        if request.method == "GET":
            if held is None:
                return RedirectResponse("/", status_code=303)
            try:
                reply = await self._ask(held, lambda kb: kb.profile(name))
            except KbusError as exc:
                return await self.library(request, (exc.reason,))
            text = reply.profile.model_dump_json(indent=2)
            return _html(pages.profile(name, reply, held.csrf, text))
        posted = await self._posted(request, keep_form=True)
        if isinstance(posted, Response):
            return posted
        signin, form = posted
        text, sample = str(form.get("profile") or ""), str(form.get("sample") or "")
        try:
            chosen = LibraryProfile.model_validate_json(text)
            change = api.ProfileChange(profile=chosen, example=sample or None)
            reply = await self._ask(signin, lambda kb: api.profile(kb, name, change))
        except ValidationError as exc:
            current = await self._ask(signin, lambda kb: kb.profile(name))
            said = f"not saved: {describe_validation_error(exc)}"
            return _html(pages.profile(name, current, signin.csrf, text, sample, said), 400)
        except KbusError as exc:
            current = await self._ask(signin, lambda kb: kb.profile(name))
            return _html(pages.profile(name, current, signin.csrf, text, sample, exc.reason), 400)
        cut = (
            f"; the sample was cut into {reply.example_chunks} chunks"
            if reply.example_chunks is not None
            else ""
        )
        said = f"saved as revision {reply.revision}{cut}"
        shown = reply.profile.model_dump_json(indent=2)
        return _html(pages.profile(name, reply, signin.csrf, shown, sample, said))

    async def _publish(
        self, held: SignIn, library: str, sources: list[tuple[str, dict[str, Any]] | str]
    ) -> list[str]:
        """Publish each source, waiting until each is searchable; a line each."""

        async def one(source: tuple[str, dict[str, Any]] | str) -> str:
            if isinstance(source, str):
                return source  # why a file was not read
            doc_id, fields = source
            try:
                await self._ask(
                    held,
                    lambda kb: kb.publish_document(
                        library=library,
                        document_id=doc_id,
                        wait=True,
                        timeout_s=IMPORT_WAIT_S,
                        interactive=True,
                        **fields,
                    ),
                )
            except (KbusError, ValueError) as exc:
                return f"{doc_id}: not imported: {exc}"
            except TimeoutError:
                return f"{doc_id}: on its way (not searchable after {IMPORT_WAIT_S:.0f} s)"
            return f"{doc_id}: indexed"

        # A few at once: each holds one of the tenant's requests (KBUS_CONSOLE_TENANT_REQUESTS).
        turns = asyncio.Semaphore(IMPORTS_AT_ONCE)

        async def in_turn(source: tuple[str, dict[str, Any]] | str) -> str:
            async with turns:
                return await one(source)

        return list(await asyncio.gather(*(in_turn(source) for source in sources)))

    async def _ask(self, held: SignIn, asked: Callable[[KbClient], Awaitable[T]]) -> T:
        async with self.sessions.serving(f"Bearer {held.token}") as kb:
            return await asked(kb)

    async def _posted(self, request: Request, keep_form: bool = False) -> Any:
        """The sign-in of a form post that carries its CSRF token (with the form, when
        ``keep_form``), or the answer that refuses it."""
        held = self.signins.of(request.cookies.get(COOKIE))
        size = request.headers.get("content-length", "")
        if not size.isdigit() or int(size) > self.max_body_bytes:
            limit = f"{self.max_body_bytes // 1024**2} MiB"
            return _html(pages.page("Too large", f"<p>Send at most {limit} at once.</p>"), 413)
        form = await request.form(max_files=64, max_fields=16)
        if held is None:
            return RedirectResponse("/", status_code=303)
        if not csrf_ok(held, str(form.get("csrf") or "")):
            return _html(pages.page("Refused", "<p>This form is stale: reload the page.</p>"), 403)
        return (held, form) if keep_form else held


async def _from_file(upload: UploadFile) -> tuple[str, dict[str, Any]] | str:
    """An uploaded file as a publish's id and fields, or why it cannot be one."""
    filename = upload.filename or "upload"
    suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
    kind = by_extension().get(suffix)
    if kind is None or kind.records:
        return f"{filename}: not imported: kbus takes {', '.join(by_extension())} here"
    data = await upload.read()
    fields: dict[str, Any] = {"content_type": kind, "title": filename.rsplit(".", 1)[0]}
    if kind in TEXT:
        try:
            fields["text"] = data.decode("utf-8")
        except UnicodeDecodeError:
            return f"{filename}: not imported: it is not UTF-8 text"
    else:
        fields["data"] = data
    return document_id_of(filename), fields


def _restricted(held: SignIn) -> bool:
    """Whether the sign-in's credential reads the records of restricted documents too."""
    return CredentialFile.from_token(held.token).names_restricted()


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(
        text, status_code=status, headers={"Content-Security-Policy": pages.PAGE_POLICY}
    )
