"""The one printable filter (:mod:`jarvis.entrypoints.terminal_text`)."""

from __future__ import annotations

import io

import pytest

from jarvis.entrypoints.terminal_text import for_terminal, terminal_safe


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain text\twith tab\nand newline", "plain text\twith tab\nand newline"),
        ("a\x1b[2Jb", "a\ufffdb"),  # CSI: one replacement for the sequence
        ("a\x1b]0;title\x07b", "a\ufffdb"),  # OSC up to BEL
        ("a\x1b]52;c;Zm9v\x1b\\b", "a\ufffdb"),  # OSC 52 (clipboard) up to ST
        ("a\x9b31mb", "a\ufffdb"),  # C1 CSI
        ("a\x1bb", "a\ufffd"),  # ESC and one character
        ("a\rb\x08c\x00d\x7fe\x85f", "a\ufffdb\ufffdc\ufffdd\ufffde\ufffdf"),
        ("abc\u202edef\u2066g\u200fh", "abc\ufffddef\ufffdg\ufffdh"),
        ("ünïcode ✓ 日本 🙂 e\u0301 \u00a0nbsp", "ünïcode ✓ 日本 🙂 e\u0301 \u00a0nbsp"),
        ("a\x1b]0;no end\nnext line", "a\ufffd\nnext line"),  # an OSC never eats a line
    ],
)
def test_controls_are_replaced_and_text_is_kept(text: str, shown: str) -> None:
    assert terminal_safe(text) == shown


def test_a_sequence_split_across_pieces_is_neutralised_all_the_same() -> None:
    pieces = ["Paris\x1b", "]0;pwned\x07 is"]
    joined = "".join(terminal_safe(p) for p in pieces)
    assert "\x1b" not in joined
    assert "\x07" not in joined


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_only_a_terminal_gets_the_filtered_text() -> None:
    text = "a\x1b[2Jb"
    assert for_terminal(text, _Terminal()) == "a\ufffdb"
    assert for_terminal(text, io.StringIO()) == text
    assert for_terminal(text, None) == text
