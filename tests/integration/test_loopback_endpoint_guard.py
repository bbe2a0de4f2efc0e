"""The ``claude_code`` runner's loopback endpoint behind the same listener guard as
``jarvis serve``: even with its key, another local user, a rebinding ``Host`` and a
cross-site ``Origin`` are refused; the owner with the key is served."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from jarvis.entrypoints.composition.loopback import loopback_endpoint
from jarvis.testing import ScriptedInference
from tests.support.serve_process import curl_as
from tests.support.users import throwaway_user

pytestmark = pytest.mark.integration

BODY = {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}


@pytest.fixture
async def endpoint() -> AsyncIterator[tuple[str, str]]:
    served = loopback_endpoint()
    url, key = await served.start(ScriptedInference(["Hello."] * 8), "m")
    try:
        yield url, key
    finally:
        await served.aclose()


async def _post(
    url: str, key: str, uid: int | None = None, gid: int | None = None, **headers: str
) -> tuple[int, str]:
    reply = await asyncio.to_thread(
        curl_as,
        uid,
        gid,
        url + "/v1/messages",
        method="POST",
        body=BODY,
        headers={"x-api-key": key, **headers},
    )
    return reply.status, reply.body


async def test_another_user_with_the_key_is_refused(endpoint: tuple[str, str]) -> None:
    url, key = endpoint
    with throwaway_user("jlg") as (uid, gid):
        theirs = await _post(url, key, uid, gid)
    mine = await _post(url, key)
    assert theirs[0] == 403, theirs
    assert "user_not_allowed" in theirs[1] or "uid" in theirs[1]
    assert mine[0] == 200, mine


async def test_a_rebinding_host_or_a_cross_site_origin_is_refused(
    endpoint: tuple[str, str],
) -> None:
    url, key = endpoint
    port = url.rsplit(":", 1)[1]
    rebound = await _post(url, key, host=f"attacker.example:{port}")
    cross = await _post(url, key, origin="https://attacker.example")
    assert rebound[0] == 421, rebound
    assert cross[0] == 403, cross
