"""HTML to text with the standard library parser."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from jarvis.adapters.httpx_web.html_text import html_to_text


def test_preformatted_text_keeps_its_lines() -> None:
    title, text = html_to_text("<p>code:</p><pre>def f():\n    a  =  1</pre><p>end</p>")
    assert title == ""
    assert text == "code:\ndef f():\n    a  =  1\nend"


def test_hidden_parts_are_dropped_even_when_unclosed() -> None:
    assert html_to_text("<p>shown</p><script>var x = '<p>no</p>'")[1] == "shown"
    assert html_to_text("<svg><text>drawing</text></svg>visible")[1] == "visible"


def test_entities_and_broken_markup() -> None:
    assert html_to_text("<div>a &amp; b &#x263A; <b>bold</div></span>")[1] == "a & b ☺ bold"
    assert html_to_text("<<<>>> <a href='x>y'>link</a")[1].startswith("<<<>>> link")


@given(st.text(max_size=300))
def test_any_text_is_accepted(markup: str) -> None:
    title, text = html_to_text(markup)
    assert isinstance(title, str)
    assert isinstance(text, str)


def test_the_head_is_skipped_even_without_its_end_tag() -> None:
    assert html_to_text("<head><title>T</title><meta x>junk<body><p>body text") == (
        "T",
        "body text",
    )
