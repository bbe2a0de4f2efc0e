"""Cutting a document into chunks by its structure, in one linear pass.

A document is first cut into *blocks*: paragraphs (runs of non-blank lines), fenced code
blocks (```` ``` ```` or ``~~~``, kept whole however many blank lines they hold) and, in
Markdown, each heading (which also starts a new chunk: a chunk never straddles two
sections). Blocks are then packed into chunks of at most ``max_chars`` characters; a block
too large for one chunk is cut between lines, and a line too long for one is cut into
pieces. When a chunk is full, the next one starts with the last lines of the previous (up
to ``overlap`` characters), so a sentence cut at a boundary is whole in one of them.

Every chunk keeps the line range it came from (1-based, inclusive) and the SHA-256 of its
text.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Final

from jarvis.domain.knowledge import Chunk

DEFAULT_CHUNK_CHARS: Final = 800
"""Characters per chunk: about 200 word pieces, inside all-MiniLM-L6-v2's 256."""
DEFAULT_OVERLAP: Final = 100
MIN_CHUNK_CHARS: Final = 64
_HEADING: Final = re.compile(r"#{1,6}(?:\s|$)")
_FENCE: Final = ("```", "~~~")


@dataclass(frozen=True, slots=True)
class _Piece:
    line: int
    text: str


@dataclass(slots=True)
class _Block:
    pieces: list[_Piece]
    heading: bool = False

    @property
    def size(self) -> int:
        return sum(len(p.text) + 1 for p in self.pieces)


def _blocks(text: str, *, markdown: bool) -> list[_Block]:
    blocks: list[_Block] = []
    current: list[_Piece] = []
    fence = ""

    def close() -> None:
        if current:
            blocks.append(_Block(list(current)))
            current.clear()

    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if fence:
            current.append(_Piece(number, line))
            if stripped.startswith(fence):
                fence = ""
                close()
            continue
        if stripped.startswith(_FENCE):
            close()
            fence = stripped[:3]
            current.append(_Piece(number, line))
            continue
        if not stripped:
            close()
            continue
        if markdown and _HEADING.match(line):
            close()
            blocks.append(_Block([_Piece(number, line)], heading=True))
            continue
        current.append(_Piece(number, line))
    close()
    return blocks


def _fit(block: _Block, max_chars: int) -> list[_Block]:
    """``block`` cut into blocks of at most ``max_chars`` (between lines, long lines cut)."""
    if block.size <= max_chars:
        return [block]
    out: list[_Block] = []
    current: list[_Piece] = []
    size = 0
    for piece in block.pieces:
        parts = [
            _Piece(piece.line, piece.text[start : start + max_chars - 1])
            for start in range(0, max(len(piece.text), 1), max_chars - 1)
        ]
        for part in parts:
            if current and size + len(part.text) + 1 > max_chars:
                out.append(_Block(current))
                current, size = [], 0
            current.append(part)
            size += len(part.text) + 1
    if current:
        out.append(_Block(current))
    if out and block.heading:
        out[0].heading = True
    return out


def _chunk(pieces: list[_Piece]) -> Chunk | None:
    text = "\n".join(p.text for p in pieces).strip("\n")
    if not text.strip():
        return None
    return Chunk(
        text=text,
        line=pieces[0].line,
        end_line=pieces[-1].line,
        content_hash=hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
    )


def chunk_text(
    text: str,
    *,
    kind: str = "text",
    max_chars: int = DEFAULT_CHUNK_CHARS,
    overlap: int = DEFAULT_OVERLAP,
) -> list[Chunk]:
    """``text`` cut into chunks (``kind`` ``markdown`` also cuts at headings)."""
    max_chars = max(MIN_CHUNK_CHARS, max_chars)
    overlap = max(0, min(overlap, max_chars // 2 - 1))
    chunks: list[Chunk] = []
    current: list[_Piece] = []
    size = 0
    carried = 0  # pieces at the start of ``current`` repeated from the previous chunk

    def flush(keep_overlap: bool) -> None:
        nonlocal current, size, carried
        if len(current) > carried:
            made = _chunk(current)
            if made is not None:
                chunks.append(made)
        tail: list[_Piece] = []
        used = 0
        if keep_overlap and overlap:
            for piece in reversed(current):
                if used + len(piece.text) + 1 > overlap:
                    break
                tail.insert(0, piece)
                used += len(piece.text) + 1
        current, size, carried = tail, used, len(tail)

    for whole in _blocks(text, markdown=kind == "markdown"):
        # a block is cut to leave room for the overlap the chunk it starts may carry
        for block in _fit(whole, max_chars - overlap):
            if block.heading and current:
                flush(keep_overlap=False)
            elif current and size + block.size > max_chars:
                flush(keep_overlap=True)
                while current and size + block.size > max_chars:
                    current.pop(0)
                    carried -= 1
                    size = sum(len(p.text) + 1 for p in current)
            current.extend(block.pieces)
            size += block.size
    flush(keep_overlap=False)
    return chunks
