"""The server writes what one step of the event loop produces in one piece, in order.

The transport under :class:`~jarvis.entrypoints.http.protocol._CoalescingTransport` here
records its writes: counting the calls a real socket gets is what no real transport tells.
"""

from __future__ import annotations

import asyncio

import httpx

from jarvis.entrypoints.http.protocol import _CoalescingTransport
from tests.support.serve import serving


class _Recording(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.writes.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


async def _step() -> None:
    await asyncio.sleep(0)
    await asyncio.sleep(0)


async def test_the_head_and_body_of_a_response_go_out_in_one_write() -> None:
    real = _Recording()
    transport = _CoalescingTransport(real, asyncio.get_running_loop())
    transport.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
    transport.write(b"ok")
    assert real.writes == []  # not before the step ends
    assert transport.get_write_buffer_size() == 40
    await _step()
    assert real.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"]


async def test_frames_written_in_separate_steps_go_out_as_they_come() -> None:
    real = _Recording()
    transport = _CoalescingTransport(real, asyncio.get_running_loop())
    for frame in (b"data: 1\n\n", b"data: 2\n\n"):
        transport.write(frame)
        await _step()
        assert real.writes[-1] == frame
    assert len(real.writes) == 2


async def test_closing_writes_what_is_pending_first() -> None:
    real = _Recording()
    transport = _CoalescingTransport(real, asyncio.get_running_loop())
    transport.write(b"last words")
    transport.close()
    assert real.writes == [b"last words"]
    assert real.closed
    await _step()
    assert real.writes == [b"last words"]  # not twice


async def test_nothing_is_written_once_the_connection_is_closing() -> None:
    real = _Recording()
    transport = _CoalescingTransport(real, asyncio.get_running_loop())
    transport.write(b"too late")
    real.closed = True  # the client went away within the step
    await _step()
    assert real.writes == []


def test_keep_alive_requests_are_answered_whole_and_in_order() -> None:
    with serving() as served, httpx.Client(base_url=served.url) as client:
        for _ in range(20):
            reply = client.get("/health")
            assert reply.status_code == 200
            assert reply.json()["status"] == "ok"
