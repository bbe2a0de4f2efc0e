"""Reading an HTTP body with a cap on what it *decodes* to, not only on what arrives.

httpx decodes ``Content-Encoding`` one network chunk at a time, but one chunk of a gzip
bomb inflates to ~1000x its size in a single call, and stacked encodings (``gzip, gzip``)
multiply that: 1.8 KB on the wire became gigabytes before any size check could run. So the
raw bytes are read here and inflated with ``zlib``'s ``max_length``: no call ever returns
more than what is still allowed, the decoded total stops at the cap, and the bytes on the
wire are capped too (a stream of empty deflate blocks decodes to nothing, forever). Only
``gzip`` and ``deflate`` are asked for and accepted, and at most one of them: a stacked or
unknown encoding is refused before anything is decoded. The caller bounds the total time.
"""

from __future__ import annotations

import zlib
from typing import Final

import httpx

ACCEPT_ENCODING: Final = "gzip, deflate"
"""The ``Accept-Encoding`` every request sends: what :func:`read_bounded` can decode."""

_WIRE_SLACK: Final = 64 * 1024
_GZIP: Final = frozenset({"gzip", "x-gzip"})


class BodyRefused(Exception):
    """The body is encoded in a way that is not read (stacked, unknown or corrupt)."""


class _Inflater:
    """One ``gzip`` or ``deflate`` layer; ``deflate`` may be zlib-wrapped or raw."""

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        self._gzip = encoding in _GZIP
        self._started = False
        self._engine = zlib.decompressobj(zlib.MAX_WBITS | 16 if self._gzip else zlib.MAX_WBITS)

    @property
    def finished(self) -> bool:
        return self._engine.eof

    @property
    def pending(self) -> bytes:
        return self._engine.unconsumed_tail

    def inflate(self, data: bytes, room: int) -> bytes:
        """At most ``room`` decoded bytes; input not yet used stays in :attr:`pending`."""
        try:
            if not self._started and not self._gzip:
                self._started = True
                try:
                    return self._engine.decompress(data, room)
                except zlib.error:  # servers send raw deflate under the zlib name
                    self._engine = zlib.decompressobj(-zlib.MAX_WBITS)
            self._started = True
            return self._engine.decompress(data, room)
        except zlib.error as exc:
            raise BodyRefused(f"its {self.encoding} data is corrupt ({exc})") from None


def _inflater(response: httpx.Response) -> _Inflater | None:
    codings = [
        coding.strip().lower()
        for coding in response.headers.get_list("content-encoding", split_commas=True)
    ]
    codings = [coding for coding in codings if coding and coding != "identity"]
    if len(codings) > 1:
        raise BodyRefused(
            f"it is encoded several times over ({', '.join(codings)}); stacked content "
            "encodings are refused"
        )
    if not codings:
        return None
    if codings[0] not in _GZIP | {"deflate"}:
        raise BodyRefused(f"its content encoding {codings[0]!r} is not supported")
    return _Inflater(codings[0])


async def read_bounded(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """``(body, truncated)``: at most ``max_bytes`` decoded bytes, read as they come.

    Reading stops as soon as the decoded body passes ``max_bytes`` or the raw bytes pass
    ``max_bytes`` plus a little; ``truncated`` says so. Raises :class:`BodyRefused`.
    """
    inflater = _inflater(response)
    body = bytearray()
    wire = 0
    async for raw in response.aiter_raw():
        wire += len(raw)
        if inflater is None:
            body += raw[: max_bytes + 1 - len(body)]
        else:
            pending = raw
            while pending and not inflater.finished and len(body) <= max_bytes:
                body += inflater.inflate(pending, max_bytes + 1 - len(body))
                pending = inflater.pending
        if len(body) > max_bytes or wire > max_bytes + _WIRE_SLACK:
            del body[max_bytes:]
            return bytes(body), True
        if inflater is not None and inflater.finished:
            break  # anything after the end of the compressed stream is ignored
    # no flush: a decompress call that stopped short of its room had nothing more to give
    truncated = len(body) > max_bytes
    del body[max_bytes:]
    return bytes(body), truncated
