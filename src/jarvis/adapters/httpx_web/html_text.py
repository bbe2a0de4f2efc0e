"""HTML reduced to readable text, in time linear in the page's size.

Scripts, styles and other invisible parts are dropped, block elements become line breaks,
list items get a dash, entities are decoded and runs of whitespace collapse.

The page comes from the network, so the scanner is hand-written rather than the standard
library's ``html.parser``, which is quadratic on malformed markup on this Python (64 KiB of
``<a '`` took 12 s of CPU, so a 2 MiB page would hold a thread for hours): every search
below starts where the last one ended and looks for a fixed string or a single character
class, and an unfinished comment, tag or quoted value ends the document instead of being
scanned again.
"""

from __future__ import annotations

import re
from html import unescape
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
_WHITESPACE = re.compile(r"\s+")
_KEPT_SPACE = "\ue000"
_KEPT_TAB = "\ue001"


_MARKUP = re.compile(r"<[a-zA-Z/!?]")
_TAG_NAME = re.compile(r"</?([a-zA-Z][a-zA-Z0-9:-]*)")
_TAG_END = re.compile(r"[>\"']")
_RAW_TEXT: Final = frozenset({"script", "style"})


class _TextExtractor:
    def __init__(self) -> None:
        self.parts: list[str] = []
        self.title_parts: list[str] = []
        self.hidden_depth = 0
        self.pre_depth = 0
        self.in_title = False
        self.in_head = False

    def feed(self, html: str) -> None:
        """One pass over ``html``; each character is looked at a bounded number of times."""
        position, size = 0, len(html)
        while position < size:
            found = _MARKUP.search(html, position)
            if found is None:
                self.handle_data(unescape(html[position:]))
                return
            opening = found.start()
            if opening > position:
                self.handle_data(unescape(html[position:opening]))
            position = self._markup(html, opening)

    def _markup(self, html: str, opening: int) -> int:
        """Handles the markup at ``opening``; returns where the text after it starts."""
        if html.startswith("<!--", opening):
            end = html.find("-->", opening + 4)
            return len(html) if end < 0 else end + 3
        if html.startswith(("<!", "<?"), opening):
            end = html.find(">", opening + 2)
            return len(html) if end < 0 else end + 1
        name = _TAG_NAME.match(html, opening)
        if name is None:  # "</" not starting an end tag is text
            self.handle_data(html[opening : opening + 2])
            return opening + 2
        end = self._tag_end(html, name.end())
        if end < 0:
            return len(html)  # an unfinished tag ends the document
        tag = name.group(1).lower()
        if html[opening + 1] == "/":
            self.handle_endtag(tag)
            return end
        self.handle_starttag(tag)
        if tag in _RAW_TEXT:  # their content is never markup, nor shown
            self.handle_endtag(tag)
            closing = re.compile(rf"</{tag}[\s/>]", re.IGNORECASE).search(html, end)
            return len(html) if closing is None else self._tag_end(html, closing.start() + 2)
        return end

    @staticmethod
    def _tag_end(html: str, position: int) -> int:
        """Just past the ``>`` closing a tag, skipping quoted values; -1 when unclosed."""
        while True:
            found = _TAG_END.search(html, position)
            if found is None:
                return -1
            if found.group() == ">":
                return found.end()
            quote_end = html.find(found.group(), found.end())
            if quote_end < 0:
                return -1
            position = quote_end + 1

    def handle_starttag(self, tag: str) -> None:
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
    parser.feed(html)
    lines = (_SPACES.sub(" ", line).strip() for line in "".join(parser.parts).split("\n"))
    text = _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()
    text = text.replace(_KEPT_SPACE, " ").replace(_KEPT_TAB, "\t")
    title = _SPACES.sub(" ", " ".join(parser.title_parts)).strip()
    return title, text
