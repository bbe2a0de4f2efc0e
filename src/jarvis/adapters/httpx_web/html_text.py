"""HTML reduced to readable text with the standard library's ``html.parser``.

Scripts, styles and other invisible parts are dropped, block elements become line breaks,
list items get a dash, entities are decoded and runs of whitespace collapse.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Final

_HIDDEN: Final = frozenset(
    {"script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"}
)
_VOID: Final = frozenset(
    {
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "source",
        "track",
        "wbr",
    }
)
_BLOCK: Final = frozenset(
    {
        "p",
        "div",
        "br",
        "hr",
        "li",
        "ul",
        "ol",
        "dl",
        "dt",
        "dd",
        "tr",
        "table",
        "section",
        "article",
        "header",
        "footer",
        "nav",
        "aside",
        "main",
        "pre",
        "blockquote",
        "form",
        "figure",
        "figcaption",
        "details",
        "summary",
        "address",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "title",
    }
)
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n{3,}")
_TAGS = re.compile(r"<[^>]*>")
_WHITESPACE = re.compile(r"\s+")
_KEPT_SPACE = "\ue000"
_KEPT_TAB = "\ue001"


class _TextExtractor(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.hidden_depth = 0
        self.pre_depth = 0
        self.in_title = False
        self.in_head = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "head":
            self.in_head = True
        elif tag == "body":  # also ends a <head> whose end tag was left out
            self.in_head = False
        if tag == "title":
            self.in_title = True
        elif tag == "pre":
            self.pre_depth += 1
        elif tag in _HIDDEN and tag not in _VOID:
            self.hidden_depth += 1
        if tag in _BLOCK:
            self.newline()
        if tag == "li" and not self.hidden_depth:
            self.parts.append("- ")

    def handle_endtag(self, tag: str) -> None:
        if tag == "head":
            self.in_head = False
        if tag == "title":
            self.in_title = False
        elif tag == "pre" and self.pre_depth:
            self.pre_depth -= 1
        elif tag in _HIDDEN and self.hidden_depth:
            self.hidden_depth -= 1
        if tag in _BLOCK:
            self.newline()

    def newline(self) -> None:
        while self.parts:
            if self.parts[-1].endswith("\n"):
                return
            if self.parts[-1].strip():
                self.parts.append("\n")
                return
            self.parts.pop()  # whitespace between tags

    def handle_data(self, data: str) -> None:
        if self.in_title:
            self.title_parts.append(data)
        elif not self.hidden_depth and not self.in_head:
            if self.pre_depth:  # keep its spaces through the final whitespace clean-up
                self.parts.append(data.replace(" ", _KEPT_SPACE).replace("\t", _KEPT_TAB))
            else:
                self.parts.append(_WHITESPACE.sub(" ", data))


def html_to_text(html: str) -> tuple[str, str]:
    """``(title, text)`` of an HTML document; never raises on malformed markup."""
    parser = _TextExtractor()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # the stdlib parser is lenient; this is a last resort
        return "", _SPACES.sub(" ", _TAGS.sub(" ", html)).strip()
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    text = text.replace(_KEPT_SPACE, " ").replace(_KEPT_TAB, "\t")
    title = _SPACES.sub(" ", " ".join(parser.title_parts)).strip()
    return title, text
