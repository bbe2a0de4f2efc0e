"""A fast check for a local Ollama, used when the engine choice is ``auto``."""

from __future__ import annotations

import asyncio
import json

import httpx

from jarvis.adapters.inference.ollama import normalize_host

MAX_BODY = 4096
"""Ollama's version answer is a few dozen bytes."""


async def ollama_reachable(host: str, timeout: float = 0.3) -> bool:
    """True when an Ollama server answers ``GET /api/version`` at ``host`` within ``timeout``.

    Never raises. ``/api/version`` is cheap and Ollama-specific (another server on the port
    answers 404), so ``auto`` does not mistake some other local service for Ollama.
    ``timeout`` bounds the whole probe, and at most ``MAX_BODY`` bytes of the answer are read:
    a server that sends slowly or endlessly is not Ollama.
    """
    url = normalize_host(host) + "/api/version"
    # a plain-HTTP probe needs no certificate store: skip loading it (it costs start-up time)
    verify = not url.startswith("http://")
    try:
        async with (
            asyncio.timeout(timeout),
            httpx.AsyncClient(
                timeout=timeout, verify=verify, headers={"Accept-Encoding": "identity"}
            ) as client,
            client.stream("GET", url) as response,
        ):
            if not response.is_success or response.headers.get("content-encoding"):
                return False
            body = b""
            async for chunk in response.aiter_raw():
                body += chunk
                if len(body) > MAX_BODY:
                    return False
    except (httpx.HTTPError, OSError, ValueError, TimeoutError):
        return False
    try:
        data: object = json.loads(body)
    except (ValueError, RecursionError):
        return False
    return isinstance(data, dict) and "version" in data
