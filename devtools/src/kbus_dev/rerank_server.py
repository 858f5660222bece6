"""A rerank server on loopback, for trying kbus's endpoint reranker where no other runs:
``python -m kbus_dev.rerank_server --port 8790`` answers ``POST /v1/rerank`` in Cohere's shape
(``query``, ``documents``, ``top_n`` in; ``results`` of ``index`` and ``relevance_score`` out,
best first) and ``POST /rerank`` in Text Embeddings Inference's (``query``, ``texts`` in; a list
of ``index`` and ``score``), scoring with the packaged all-MiniLM-L6-v2: the cosine of the
query's and each passage's vectors. Real rerank servers (Infinity, vLLM, Text Embeddings
Inference, Jina) load their models from a model hub, which these machines cannot reach; this one
answers as they do, with a real model.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from kbus_dev.servers import Server, _spawn, _tcp_open, free_port

MODEL = "all-MiniLM-L6-v2"


def app() -> Starlette:
    from kbus_models.encoder import Encoder, resolve

    encoder = Encoder(resolve(MODEL), threads=1)

    def scores(query: str, passages: list[str]) -> np.ndarray:
        vectors = encoder.embed([query, *passages])
        result: np.ndarray = vectors[1:] @ vectors[0]
        return result

    async def asked(request: Request, field: str) -> tuple[str, list[str]] | JSONResponse:
        try:
            body: dict[str, Any] = await request.json()
            query, passages = body["query"], body[field]
            if not isinstance(query, str) or not all(isinstance(p, str) for p in passages):
                raise TypeError
        except (ValueError, KeyError, TypeError):
            return JSONResponse({"error": f"query (text) and {field} (texts) wanted"}, 422)
        return query, list(passages)

    async def cohere(request: Request) -> JSONResponse:
        got = await asked(request, "documents")
        if isinstance(got, JSONResponse):
            return got
        found = scores(*got)
        order = np.argsort(-found)
        body = await request.json()
        top = order[: int(body.get("top_n") or len(order))]
        results = [{"index": int(i), "relevance_score": float(found[i])} for i in top]
        return JSONResponse({"model": MODEL, "results": results})

    async def tei(request: Request) -> JSONResponse:
        got = await asked(request, "texts")
        if isinstance(got, JSONResponse):
            return got
        found = scores(*got)
        return JSONResponse(
            [{"index": int(i), "score": float(found[i])} for i in np.argsort(-found)]
        )

    return Starlette(
        routes=[
            Route("/v1/rerank", cohere, methods=["POST"]),
            Route("/rerank", tei, methods=["POST"]),
        ]
    )


def start_rerank_server(log_dir: Path) -> Server:
    """The server on a free loopback port, once it answers; its base URL is
    ``http://127.0.0.1:{port}/v1`` (Cohere's shape) or without ``/v1`` (TEI's)."""
    port = free_port()
    cmd = [sys.executable, "-m", "kbus_dev.rerank_server", "--port", str(port)]
    log = log_dir / "rerank-server.log"
    server = Server("rerank-server", _spawn(cmd, log), log, {"http": port}, cmd)
    deadline = time.monotonic() + 120
    while not _tcp_open(port):
        if server.proc.poll() is not None or time.monotonic() > deadline:
            server.stop()
            raise RuntimeError(f"the rerank server did not start: {log.read_text()[-2000:]}")
        time.sleep(0.2)
    return server


def main(argv: list[str] | None = None) -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m kbus_dev.rerank_server", description=__doc__)
    parser.add_argument("--port", type=int, default=8790)
    args = parser.parse_args(argv)
    uvicorn.run(app(), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
