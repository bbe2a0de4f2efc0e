"""A fast check for a local Ollama, used when the engine choice is ``auto``."""

from __future__ import annotations

import httpx

from jarvis.adapters.inference.ollama import normalize_host


async def ollama_reachable(host: str, timeout: float = 0.3) -> bool:
    """True when an Ollama server answers ``GET /api/version`` at ``host`` within ``timeout``.

    Never raises. ``/api/version`` is cheap and Ollama-specific (another server on the port
    answers 404), so ``auto`` does not mistake some other local service for Ollama.
    """
    url = normalize_host(host) + "/api/version"
    # a plain-HTTP probe needs no certificate store: skip loading it (it costs start-up time)
    verify = not url.startswith("http://")
    try:
        async with httpx.AsyncClient(timeout=timeout, verify=verify) as client:
            response = await client.get(url)
    except (httpx.HTTPError, OSError, ValueError):
        return False
    if not response.is_success:
        return False
    try:
        data: object = response.json()
    except ValueError:
        return False
    return isinstance(data, dict) and "version" in data
