"""Secret values taken out of text, whole or streamed piece by piece.

A sandboxed run is given secrets; anything its container says may echo them. Whole strings
(an answer, a tool result, a tool call's arguments) go through :meth:`SecretMask.redact`
(one linear replace per secret, longest first; at most ``MAX_SECRETS`` of them);
streamed text (a secret may be split across two deltas) goes through a
:class:`StreamMasker`, which holds back the longest tail that could still become a secret
and lets it out once it cannot (or when the stream is flushed at its end).

The streamed matcher is an Aho-Corasick automaton over the secrets: each character moves it
one step (failure links amortise the fall-backs), each character is held back and let out
at most once, so the work is linear in the text whatever it holds. Only the literal values
are recognised: an encoded form (base64, hex, reversed, split by the model itself into
separate tool calls) is a different string and passes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

REDACTED = "[secret]"
MIN_SECRET_CHARS = 4
"""Shorter values are not masked (masking every ``a`` would destroy the text, not protect
anything)."""


class SecretMask:
    """The secrets of one run, longest first, and their automaton."""

    def __init__(self, secrets: Iterable[str]) -> None:
        unique = {s for s in secrets if len(s) >= MIN_SECRET_CHARS}
        self.secrets: tuple[str, ...] = tuple(sorted(unique, key=lambda s: (-len(s), s)))
        self._goto: list[dict[str, int]] = [{}]
        self._fail: list[int] = [0]
        self._depth: list[int] = [0]
        self._match: list[int] = [0]
        """The length of the longest secret that ends at this state (0: none)."""
        for secret in self.secrets:
            self._add(secret)
        self._link()

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def _add(self, secret: str) -> None:
        state = 0
        for char in secret:
            following = self._goto[state].get(char)
            if following is None:
                following = len(self._goto)
                self._goto.append({})
                self._fail.append(0)
                self._depth.append(self._depth[state] + 1)
                self._match.append(0)
                self._goto[state][char] = following
            state = following
        self._match[state] = max(self._match[state], len(secret))

    def _link(self) -> None:
        queue: deque[int] = deque(self._goto[0].values())
        while queue:
            state = queue.popleft()
            for char, following in self._goto[state].items():
                queue.append(following)
                fallback = self._fail[state]
                while fallback and char not in self._goto[fallback]:
                    fallback = self._fail[fallback]
                target = self._goto[fallback].get(char, 0)
                self._fail[following] = target if target != following else 0
                self._match[following] = max(self._match[following], self._match[target])

    def step(self, state: int, char: str) -> int:
        """The automaton's state after ``char``."""
        goto = self._goto
        while state and char not in goto[state]:
            state = self._fail[state]
        return goto[state].get(char, 0)

    def depth(self, state: int) -> int:
        return self._depth[state]

    def matched(self, state: int) -> int:
        return self._match[state]

    def redact(self, text: str) -> str:
        """``text`` with every secret replaced by :data:`REDACTED`."""
        for secret in self.secrets:  # longest first; each pass linear (str.replace)
            if secret in text:
                text = text.replace(secret, REDACTED)
        return text


class StreamMasker:
    """Masks one stream of text pieces (see the module docstring)."""

    def __init__(self, mask: SecretMask) -> None:
        self._mask = mask
        self._state = 0
        self._held: deque[str] = deque()

    def feed(self, text: str) -> str:
        """What of ``text`` (and of what was held back) can be let out now."""
        mask = self._mask
        if not mask:
            return text
        out: list[str] = []
        held = self._held
        state = self._state
        for char in text:
            held.append(char)
            state = mask.step(state, char)
            length = mask.matched(state)
            if length:
                out.extend(held.popleft() for _ in range(len(held) - length))
                out.append(REDACTED)
                held.clear()
                state = 0
        keep = mask.depth(state)
        out.extend(held.popleft() for _ in range(len(held) - keep))
        self._state = state
        return "".join(out)

    def flush(self) -> str:
        """Everything still held back (the stream ended: it cannot become a secret)."""
        rest = "".join(self._held)
        self._held.clear()
        self._state = 0
        return rest
