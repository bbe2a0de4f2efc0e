"""The linear-time parsers read every reply exactly as the backtracking patterns they
replaced did: each is checked against that pattern, kept here as the reference, on short
texts made of the characters and words the patterns care about (short, because the
references are exponential or quadratic)."""

from __future__ import annotations

import itertools
import json
import re

from hypothesis import example, given, settings
from hypothesis import strategies as st

from jarvis.domain.llm.completion import Completion
from jarvis.domain.protocols.code_blocks import code_blocks
from jarvis.domain.protocols.react_parser import (
    REACT_LABELS,
    STRUCTURED_LABELS,
    ActionLabels,
    find_labels,
)
from jarvis.domain.protocols.reply_text import strip_think
from jarvis.domain.protocols.structured import StructuredProtocol
from jarvis.domain.protocols.text_protocol import LabelledAnswerFilter
from jarvis.domain.protocols.tool_protocol import ThinkFilter

FRAGMENTS = [
    *'_*#>` \t\n:{"\\-12ax',
    "<think>",
    "</think>",
    "<THINK>",
    "</",
    "<thi",
    "nk>",
    "```",
    "```python",
    "Thought",
    "Action",
    "Action Input",
    "action_input",
    "Final Answer",
    "final",
    "answer",
    "Observation",
    "TOOL",
    "ARGUMENTS",
    "input",
    '"final_answer"',
    '"thought"',
    "Final Answer:",
    "Action:",
    "Thought:",
    "x:",
]
LINE_STARTS = [
    "",
    "",
    "**",
    "> ",
    " ",
    "Final Answer:",
    "Action:",
    "Thought:",
    "x:",
    "FINAL_ANSWER:",
]
fragments = st.sampled_from(FRAGMENTS)
# a few lines, most starting with a label or a colon, so that they meet piece boundaries
lines = st.tuples(st.sampled_from(LINE_STARTS), st.lists(fragments, max_size=3)).map(
    lambda line: line[0] + "".join(line[1])
)
texts = st.one_of(
    st.lists(fragments, max_size=14).map("".join),
    st.lists(lines, max_size=5).map("\n".join),
)
REFERENCE = settings(max_examples=400, deadline=None)


# --- the replaced patterns -----------------------------------------------------------------


def reference_labels(text: str, labels: ActionLabels) -> list[tuple[str, int, int]]:
    alternatives = (
        f"(?P<final>{labels.final_answer})",
        f"(?P<input>{labels.action_input})",
        f"(?P<action>{labels.action})",
        f"(?P<thought>{labels.thought})",
        f"(?P<observation>{labels.observation})",
    )
    pattern = re.compile(
        r"^[ \t]*(?:[*_#>]+[ \t]*)*(?:" + "|".join(alternatives) + r")(?:[ \t]*\d+)?"
        r"[ \t]*[*_]*[ \t]*:[*_]*[ \t]*",
        re.IGNORECASE | re.MULTILINE,
    )
    return [(m.lastgroup or "", m.start(), m.end()) for m in pattern.finditer(text)]


def reference_strip_think(text: str) -> str:
    if "</" not in text:
        return text.strip()
    text = re.sub(r"<think>.*?</think>", "", text, flags=re.IGNORECASE | re.DOTALL)
    text = re.sub(r"^.*?</think>", "", text, flags=re.IGNORECASE | re.DOTALL)
    return text.strip()


def reference_blocks(text: str) -> list[tuple[str, str, int, int]]:
    opening_pattern = re.compile(r"^[ \t]*```[ \t]*(?P<lang>[\w+.-]*)[^\n`]*\n", re.MULTILINE)
    closing_pattern = re.compile(r"^[ \t]*```[ \t]*$", re.MULTILINE)
    blocks = []
    position = 0
    while (opening := opening_pattern.search(text, position)) is not None:
        closing = closing_pattern.search(text, opening.end())
        if closing is None:
            code, end = text[opening.end() :], len(text)
        else:
            code, end = text[opening.end() : closing.start()], closing.end()
        blocks.append((opening.group("lang").lower(), code.rstrip() + "\n", opening.start(), end))
        position = end
    return blocks


class ReferenceThinkFilter:
    def __init__(self) -> None:
        self._held = ""
        self._inside = False
        self._started = False

    def feed(self, piece: str) -> str:
        text = self._held + piece
        self._held = ""
        out: list[str] = []
        while text:
            tag = "</think>" if self._inside else "<think>"
            index = text.lower().find(tag)
            if index < 0:
                keep = 0
                lowered = text[-(len(tag) - 1) :].lower()
                for size in range(min(len(lowered), len(tag) - 1), 0, -1):
                    if tag.startswith(lowered[-size:]):
                        keep = size
                        break
                if not self._inside:
                    out.append(text[: len(text) - keep])
                self._held = text[len(text) - keep :] if keep else ""
                break
            if not self._inside:
                out.append(text[:index])
            text = text[index + len(tag) :]
            self._inside = not self._inside
        visible = "".join(out)
        if not self._started:
            visible = visible.lstrip()
            self._started = bool(visible)
        return visible


class ReferenceAnswerFilter:
    def __init__(self, labels: ActionLabels) -> None:
        self._labels = labels
        self._think = ReferenceThinkFilter()
        self._buffer = ""
        self._open = False
        self._closed = False
        self._shown = False

    def feed(self, piece: str) -> str:
        visible = self._think.feed(piece)
        if self._open:
            return self._show(visible)
        if self._closed or not visible:
            return ""
        self._buffer += visible
        if ":" not in visible:
            return ""
        for kind, _start, end in reference_labels(self._buffer, self._labels):
            if kind == "action":
                self._closed = True
                return ""
            if kind == "final":
                self._open = True
                return self._show(self._buffer[end:])
        return ""

    def _show(self, text: str) -> str:
        if not self._shown:
            text = text.lstrip()
            self._shown = bool(text)
        return text


def pieces_of(text: str, cuts: list[int]) -> list[str]:
    """``text`` cut at ``cuts``; a single cut ``-n`` means pieces of ``n`` characters."""
    if len(cuts) == 1 and cuts[0] < 0:
        return [text[start : start - cuts[0]] for start in range(0, len(text), -cuts[0])]
    points = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(points)]


splits = st.one_of(
    st.lists(st.integers(min_value=0, max_value=200), max_size=8),
    st.integers(min_value=-6, max_value=-1).map(lambda size: [size]),
)


# --- the checks ----------------------------------------------------------------------------


@REFERENCE
@given(text=texts, structured=st.booleans())
def test_labels_are_found_as_before(text: str, structured: bool) -> None:
    labels = STRUCTURED_LABELS if structured else REACT_LABELS
    assert find_labels(text, labels) == reference_labels(text, labels)


@REFERENCE
@given(text=texts)
def test_think_blocks_are_stripped_as_before(text: str) -> None:
    assert strip_think(text) == reference_strip_think(text)


@REFERENCE
@given(text=texts)
def test_code_blocks_are_found_as_before(text: str) -> None:
    found = [(b.language, b.code, b.start, b.end) for b in code_blocks(text)]
    assert found == reference_blocks(text)


@REFERENCE
@given(text=texts, cuts=splits)
def test_streamed_think_filter_shows_what_it_did(text: str, cuts: list[int]) -> None:
    new, old = ThinkFilter(), ReferenceThinkFilter()
    for piece in pieces_of(text, cuts):
        assert new.feed(piece) == old.feed(piece)


@REFERENCE
@given(
    text=texts,
    cuts=splits,
    structured=st.booleans(),
)
@example(text="x:\nFinal Answer: y", cuts=[2], structured=False)
@example(text="a: b\nc\nAction: z", cuts=[1, 3, 7], structured=False)
def test_streamed_answer_filter_shows_what_it_did(
    text: str, cuts: list[int], structured: bool
) -> None:
    labels = STRUCTURED_LABELS if structured else REACT_LABELS
    new, old = LabelledAnswerFilter(labels), ReferenceAnswerFilter(labels)
    for piece in pieces_of(text, cuts):
        assert new.feed(piece) == old.feed(piece)


def reference_visible_text(text: str) -> str:
    text = reference_strip_think(text)
    if not text.startswith(("{", "```")):
        return text
    for key in ("final_answer", "thought"):
        match = re.search(rf'"{key}"\s*:\s*"((?:[^"\\]|\\.)*)', text)
        if match is not None and match.group(1).strip():
            try:
                value = json.loads(f'"{match.group(1)}"')
            except ValueError:
                value = match.group(1)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


@REFERENCE
@given(text=texts)
def test_structured_visible_text_is_read_as_before(text: str) -> None:
    protocol = StructuredProtocol([])
    for candidate in (text, "{" + text, '{"final_answer": "' + text):
        completion = Completion(content=candidate)
        assert protocol.visible_text(completion) == reference_visible_text(candidate)
