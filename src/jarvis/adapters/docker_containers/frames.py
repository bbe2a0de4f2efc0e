"""The attach stream of a container without a TTY: 8-byte-header frames, then lines.

Each frame is ``[stream, 0, 0, 0, size (4 bytes, big-endian)]`` followed by ``size`` bytes
(stream 1 is stdout, 2 stderr). Frames are not lines: a line may span frames and a frame
may hold many lines, and a container chooses the sizes. So the decoder never trusts a size
for an allocation (payload is passed on as it arrives), the line splitter only scans bytes
it has not scanned before (linear time whatever the chunking), and a line longer than the
bound is an error instead of a buffer that grows without limit.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

STDOUT = 1
STDERR = 2
_HEADER = struct.Struct(">BxxxL")


class FrameError(ValueError):
    """The stream is not a valid multiplexed attach stream, or a line is too long."""


class FrameDecoder:
    """Feed raw bytes; get ``(stream, payload piece)`` pairs as the bytes arrive."""

    def __init__(self) -> None:
        self._header = bytearray()
        self._stream = 0
        self._remaining = 0

    @property
    def at_boundary(self) -> bool:
        """True between frames (a stream that ends elsewhere was cut off)."""
        return self._remaining == 0 and not self._header

    def feed(self, data: bytes) -> Iterator[tuple[int, bytes]]:
        view = memoryview(data)
        while view:
            if self._remaining == 0:
                need = _HEADER.size - len(self._header)
                self._header += view[:need]
                view = view[need:]
                if len(self._header) < _HEADER.size:
                    return
                stream, size = _HEADER.unpack(self._header)
                self._header.clear()
                if stream not in (0, STDOUT, STDERR):
                    raise FrameError(f"unknown attach stream {stream}")
                self._stream, self._remaining = stream, size
                continue
            piece = view[: self._remaining]
            view = view[len(piece) :]
            self._remaining -= len(piece)
            yield (STDERR if self._stream == STDERR else STDOUT), bytes(piece)


class LineSplitter:
    """Bytes in, complete lines (without ``\\n``) out; each at most ``max_bytes`` long."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._pending: list[bytes] = []
        self._pending_size = 0

    def feed(self, data: bytes) -> Iterator[bytes]:
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            self._check(end - start)
            piece = data[start:end]
            if self._pending:
                self._pending.append(piece)
                piece = b"".join(self._pending)
                self._pending.clear()
                self._pending_size = 0
            yield piece
            start = end + 1
        if start < len(data):
            self._check(len(data) - start)
            self._pending.append(data[start:])
            self._pending_size += len(data) - start

    def finish(self) -> bytes | None:
        """What is left at end of stream: a last line without a newline, if any."""
        if not self._pending:
            return None
        rest = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        return rest

    def _check(self, more: int) -> None:
        if self._pending_size + more > self._max:
            raise FrameError(f"a line from the container exceeds {self._max} bytes")


class Tail:
    """The last ``max_bytes`` of a byte stream (what a container wrote to stderr)."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._data = bytearray()

    def feed(self, data: bytes) -> None:
        self._data += data[-self._max :]
        if len(self._data) > self._max:
            del self._data[: len(self._data) - self._max]

    def text(self) -> str:
        return self._data.decode("utf-8", errors="replace")
