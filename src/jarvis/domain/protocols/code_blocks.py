"""Finding fenced code blocks in a model's reply.

A block opens with a line starting with three backticks and an optional language
(```` ```python ````) and closes with a line of three backticks. A block still open at the
end of the reply (the model ran out of tokens) runs to the end of the text, so the
interpreter reports the incomplete code instead of the agent silently ignoring it.

Every function here runs in time linear in the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Possessive runs (``*+``): with a plain ``[\w+.-]*[^\n`]*`` the two overlapping runs were
# tried in every split, quadratic in one long line after a fence.
_OPEN = re.compile(r"^[ \t]*+```[ \t]*+(?P<lang>[\w+.-]*+)[^\n`]*+\n", re.MULTILINE)
_CLOSE = re.compile(r"^[ \t]*+```[ \t]*+$", re.MULTILINE)

PYTHON_LANGUAGES = frozenset({"python", "py", "python3"})


@dataclass(frozen=True, slots=True)
class CodeBlock:
    """One fenced block: its language tag (lower case, "" when none), its code, and where
    the whole block (fences included) starts and ends in the text."""

    language: str
    code: str
    start: int
    end: int


def code_blocks(text: str) -> list[CodeBlock]:
    """Every fenced block of ``text``, in order."""
    blocks: list[CodeBlock] = []
    position = 0
    while True:
        opening = _OPEN.search(text, position)
        if opening is None:
            return blocks
        closing = _CLOSE.search(text, opening.end())
        if closing is None:
            code, end = text[opening.end() :], len(text)
        else:
            code, end = text[opening.end() : closing.start()], closing.end()
        blocks.append(
            CodeBlock(opening.group("lang").lower(), code.rstrip() + "\n", opening.start(), end)
        )
        position = end


def first_block(text: str, languages: frozenset[str]) -> CodeBlock | None:
    """The first block whose language is one of ``languages`` ("" stands for no tag)."""
    for block in code_blocks(text):
        if block.language in languages:
            return block
    return None


def mask_blocks(text: str) -> str:
    """``text`` with every block's content blanked (same length, newlines kept), so that
    labels written inside code are not read as protocol labels."""
    pieces: list[str] = []
    position = 0
    for block in code_blocks(text):
        pieces.append(text[position : block.start])
        pieces.append(re.sub(r"[^\n]", " ", text[block.start : block.end]))
        position = block.end
    pieces.append(text[position:])
    return "".join(pieces)


def without_blocks(text: str) -> str:
    """``text`` with every fenced block removed."""
    pieces: list[str] = []
    position = 0
    for block in code_blocks(text):
        pieces.append(text[position : block.start])
        position = block.end
    pieces.append(text[position:])
    return re.sub(r"\n{3,}", "\n\n", "".join(pieces)).strip()
