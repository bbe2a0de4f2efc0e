"""Reading a model's reply as text: ``<think>`` blocks are the model's scratch work, never
part of an answer, a tool call or a parsed label."""

from __future__ import annotations

import re

THINK_OPEN = re.compile(re.escape("<think>"), re.IGNORECASE)
THINK_CLOSE = re.compile(re.escape("</think>"), re.IGNORECASE)


def strip_think(text: str) -> str:
    """Remove ``<think>…</think>`` blocks and anything before a stray ``</think>``.

    One forward pass over the text (each tag is searched for once from where the last one
    ended): a lazy ``<think>.*?</think>`` pattern rescanned the rest of the reply from
    every unclosed ``<think>``, quadratic in a reply full of them.
    """
    if "</" not in text:  # no closing tag: nothing to remove (the common case)
        return text.strip()
    pieces: list[str] = []
    position = 0
    while (opening := THINK_OPEN.search(text, position)) is not None:
        closing = THINK_CLOSE.search(text, opening.end())
        if closing is None:  # no later <think> can close either
            break
        pieces.append(text[position : opening.start()])
        position = closing.end()
    pieces.append(text[position:])
    text = "".join(pieces)
    stray = THINK_CLOSE.search(text)
    if stray is not None:
        text = text[stray.end() :]
    return text.strip()
