"""The attach stream decoding and the slot gate of the container adapter, without a runtime."""

from __future__ import annotations

import asyncio
import struct
import threading
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from jarvis.adapters.docker_containers.frames import (
    STDERR,
    STDOUT,
    FrameDecoder,
    FrameError,
    LineSplitter,
    Tail,
)
from jarvis.adapters.docker_containers.slots import SlotGate


def frame(stream: int, payload: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(payload)) + payload


def decode(chunks: list[bytes], max_line: int = 1 << 20) -> tuple[list[bytes], bytes]:
    decoder, lines, err = FrameDecoder(), LineSplitter(max_line), Tail(1 << 16)
    out: list[bytes] = []
    for chunk in chunks:
        for stream, piece in decoder.feed(chunk):
            if stream == STDERR:
                err.feed(piece)
            else:
                out.extend(lines.feed(piece))
    rest = lines.finish()
    if rest is not None:
        out.append(rest)
    return out, err.text().encode()


def test_frames_are_not_lines() -> None:
    stream = frame(1, b'{"a":') + frame(2, b"warn") + frame(1, b' 1}\n{"b": 2}\nlast')
    assert decode([stream]) == ([b'{"a": 1}', b'{"b": 2}', b"last"], b"warn")


@given(
    st.lists(st.tuples(st.sampled_from([STDOUT, STDERR]), st.binary(max_size=40)), max_size=20),
    st.lists(st.integers(min_value=1, max_value=17), min_size=1, max_size=10),
)
def test_any_chunking_gives_the_same_lines(
    frames: list[tuple[int, bytes]], cuts: list[int]
) -> None:
    """Headers and payloads cut anywhere: the decoded streams are what was sent."""
    raw = b"".join(frame(s, p) for s, p in frames)
    chunks, at, index = [], 0, 0
    while at < len(raw):
        size = cuts[index % len(cuts)]
        chunks.append(raw[at : at + size])
        at, index = at + size, index + 1
    out, err = decode(chunks)
    stdout = b"".join(p for s, p in frames if s == STDOUT)
    expected = stdout.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    assert out == expected
    assert err == b"".join(p for s, p in frames if s == STDERR).decode(errors="replace").encode()


def test_an_unknown_stream_is_refused() -> None:
    with pytest.raises(FrameError, match="unknown attach stream"):
        list(FrameDecoder().feed(frame(7, b"x")))


def test_a_huge_announced_frame_allocates_nothing_up_front() -> None:
    decoder = FrameDecoder()
    header = struct.pack(">BxxxL", 1, 0xFFFFFFFF)
    assert list(decoder.feed(header + b"abc")) == [(STDOUT, b"abc")]
    assert not decoder.at_boundary


def test_a_line_longer_than_the_bound_is_refused_even_across_frames() -> None:
    lines = LineSplitter(10)
    assert list(lines.feed(b"0123456789\n")) == [b"0123456789"]
    list(lines.feed(b"01234"))
    with pytest.raises(FrameError, match="exceeds 10 bytes"):
        list(lines.feed(b"567890"))


def test_splitting_is_linear_in_the_input() -> None:
    """One byte at a time, a 200 000-byte line costs what one chunk does, roughly."""
    line = b"x" * 200_000
    started = time.perf_counter()
    splitter = LineSplitter(1 << 20)
    for index in range(len(line)):
        assert not list(splitter.feed(line[index : index + 1]))
    assert list(splitter.feed(b"\n")) == [line]
    assert time.perf_counter() - started < 5  # quadratic re-scanning would take minutes


def test_the_stderr_tail_keeps_the_end() -> None:
    tail = Tail(5)
    tail.feed(b"abc")
    tail.feed(b"defgh")
    assert tail.text() == "defgh"
    tail.feed(b"0123456789")
    assert tail.text() == "56789"


# --- the slot gate ------------------------------------------------------------------------


async def test_the_gate_holds_at_most_its_size_and_serves_in_order() -> None:
    gate = SlotGate(2)
    await gate.acquire()
    await gate.acquire()
    order: list[int] = []

    async def waiter(number: int) -> None:
        await gate.acquire()
        order.append(number)

    waiting = [asyncio.ensure_future(waiter(n)) for n in range(3)]
    await asyncio.sleep(0)
    assert (gate.in_use, gate.waiting) == (2, 3)
    gate.release()
    await waiting[0]
    assert order == [0]
    gate.release()
    gate.release()
    await asyncio.gather(*waiting)
    assert order == [0, 1, 2]
    assert gate.in_use == 2


async def test_a_cancelled_waiter_gives_up_its_place() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    cancelled = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert gate.waiting == 0
    gate.release()
    assert gate.in_use == 0


async def test_a_waiter_cancelled_after_its_grant_passes_the_slot_on() -> None:
    gate = SlotGate(1)
    await gate.acquire()
    first = asyncio.ensure_future(gate.acquire())
    second = asyncio.ensure_future(gate.acquire())
    await asyncio.sleep(0)
    gate.release()  # the grant to `first` is scheduled...
    first.cancel()  # ...and `first` is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 5)
    assert gate.in_use == 1


def test_the_gate_counts_across_event_loops_in_threads() -> None:
    gate, peak, holding, lock = SlotGate(3), [0], [0], threading.Lock()

    async def use() -> None:
        await gate.acquire()
        with lock:
            holding[0] += 1
            peak[0] = max(peak[0], holding[0])
        await asyncio.sleep(0.01)
        with lock:
            holding[0] -= 1
        gate.release()

    async def many() -> None:
        await asyncio.gather(*(use() for _ in range(10)))

    threads = [threading.Thread(target=asyncio.run, args=(many(),)) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert 1 <= peak[0] <= 3
    assert gate.in_use == 0
