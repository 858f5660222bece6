"""A web server on 127.0.0.1 for the tests that fetch pages: a few pages, redirects, limits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Site:
    """Pages by path (content type, body); every path asked for is recorded."""

    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {
            "/robots.txt": ("text/plain", b"User-agent: *\nDisallow: /private/\n"),
        }
        self.asked: list[str] = []
        self.url = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                site.asked.append(self.path)
                if self.path.startswith("/hop/"):
                    n = int(self.path.rsplit("/", 1)[1])
                    self._answer(302, "text/plain", b"", {"Location": f"/hop/{n + 1}"})
                elif self.path == "/endless":
                    self._endless()
                elif self.path in site.pages:
                    self._answer(200, *site.pages[self.path])
                else:
                    self._answer(404, "text/plain", b"not here")

            def _answer(
                self, status: int, kind: str, body: bytes, extra: dict[str, str] | None = None
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                for key, value in (extra or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(body)

            def _endless(self) -> None:
                # No length given: only the reader's own limit stops it.
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.end_headers()
                try:
                    for _ in range(4096):
                        self.wfile.write(b"<p>" + b"x" * 1020 + b"</p>")
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@contextmanager
def serve(site: Site) -> Iterator[Site]:
    """Serve ``site`` on a free port of 127.0.0.1 while the block runs."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), site.handler())
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield site
    finally:
        server.shutdown()
        server.server_close()
