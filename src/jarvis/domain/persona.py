"""The rules every persona store applies, whatever holds the bytes.

Kept pure (bytes in, text and warnings out) so that the filesystem adapter and the in-memory
fake cannot drift apart: both call these functions.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from jarvis.domain.errors import PersonaError
from jarvis.domain.ports import PersonaDocument, PersonaFile

NO_PERSONA = "none"
"""The selection that injects no persona at all (``--persona none``)."""

FILE_NAMES: dict[PersonaFile, str] = {
    PersonaFile.SOUL: "SOUL.md",
    PersonaFile.MEMORY: "MEMORY.md",
    PersonaFile.USER: "USER.md",
}
"""The file name of each persona file, in the default set and in ``personas/<name>/``."""

_MAX_NAME = 64
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def check_persona_name(name: str, existing: list[str]) -> str:
    """Return ``name`` when it can name a persona folder, else raise ``PersonaError``.

    A name is a single folder below ``personas/``: it must not be empty, contain ``/``,
    ``\\``, ``..`` or control characters, start with a dot, or exceed 64 characters. The
    error lists ``existing`` so the user sees what they could have meant.
    """
    problem = ""
    if not name.strip():
        problem = "is empty"
    elif "/" in name or "\\" in name:
        problem = "contains a path separator"
    elif ".." in name:
        problem = "contains '..'"
    elif name.startswith("."):
        problem = "starts with a dot"
    elif _CONTROL.search(name):
        problem = "contains control characters"
    elif len(name) > _MAX_NAME:
        problem = f"is longer than {_MAX_NAME} characters"
    elif name != name.strip():
        problem = "starts or ends with whitespace"
    if problem:
        raise PersonaError(
            f"Invalid persona name {name!r}: it {problem}.", hint=existing_personas_hint(existing)
        )
    return name


def unknown_persona(name: str, existing: list[str]) -> PersonaError:
    """The error for a well-formed name that has no folder."""
    return PersonaError(f"Unknown persona {name!r}.", hint=existing_personas_hint(existing))


def existing_personas_hint(existing: list[str]) -> str:
    if existing:
        return (
            "Existing personas: "
            + ", ".join(existing)
            + f". Use one of them, or '{NO_PERSONA}' for no persona."
        )
    return (
        "There are no named personas yet: create personas/<name>/SOUL.md (and MEMORY.md, "
        f"USER.md) in the config dir, or use '{NO_PERSONA}' for no persona."
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class DecodedText:
    """Persona bytes turned into text, or the reason they were skipped."""

    text: str
    warnings: tuple[str, ...] = ()
    skipped: bool = False
    head_chars: int = 0
    """How many characters of ``text`` came from the head (the rest is the tail)."""


def _is_continuation(byte: int) -> bool:
    return byte & 0b1100_0000 == 0b1000_0000


def decode_persona_bytes(
    head: bytes, tail: bytes = b"", *, label: str, omitted_bytes: int = 0
) -> DecodedText:
    """Decode a persona file read whole (``head``) or as its two ends (``head`` + ``tail``).

    NUL bytes mean a binary (or UTF-16) file: skipped with a warning, because it would put
    garbage into every prompt. Bytes that are not UTF-8 are replaced with U+FFFD and a
    warning is given; a leading UTF-8 byte-order mark is dropped. When only the two ends
    were read, a multi-byte character cut at either edge is dropped rather than reported
    as bad UTF-8.
    """
    if b"\x00" in head or b"\x00" in tail:
        return DecodedText(
            text="",
            skipped=True,
            warnings=(
                f"{label} was skipped: it contains NUL bytes, so it is binary or not UTF-8 "
                "(UTF-16?). Save it as UTF-8 text.",
            ),
        )
    partial = omitted_bytes > 0
    if partial:
        skip = 0
        while skip < min(3, len(tail)) and _is_continuation(tail[skip]):
            skip += 1
        tail = tail[skip:]
    strict = True
    parts: list[str] = []
    for index, chunk in enumerate((head, tail)):
        if not chunk:
            parts.append("")
            continue
        codec = "utf-8-sig" if index == 0 else "utf-8"
        decoder = codecs.getincrementaldecoder(codec)(errors="strict")
        final = not (partial and index == 0)
        try:
            parts.append(decoder.decode(chunk, final=final))
        except UnicodeDecodeError:
            strict = False
            decoder = codecs.getincrementaldecoder(codec)(errors="replace")
            parts.append(decoder.decode(chunk, final=final))
    warnings: list[str] = []
    if not strict:
        warnings.append(
            f"{label} is not valid UTF-8: the undecodable bytes were replaced with '\ufffd'."
        )
    text = parts[0] + parts[1]
    if not text.strip():
        return DecodedText(text="", skipped=True, warnings=tuple(warnings))
    return DecodedText(text=text, warnings=tuple(warnings), head_chars=len(parts[0]))


def human_size(size: int) -> str:
    """``1,234 bytes``, ``64.0 KiB``, ``2.0 GiB``."""
    if size < 1024:
        return f"{size:,} bytes"
    value = size / 1024
    for unit in ("KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


def document_from_bytes(
    kind: PersonaFile,
    source: str,
    head: bytes,
    tail: bytes,
    *,
    size: int,
    max_read_bytes: int,
) -> PersonaDocument | None:
    """The document for a file read whole (``head``) or at its two ends; ``None`` = empty.

    ``size`` is the file's full size; when it exceeds ``max_read_bytes`` the caller has read
    only ``head`` and ``tail`` and the document records the unread middle.
    """
    omitted = max(0, size - len(head) - len(tail)) if size > max_read_bytes else 0
    decoded = decode_persona_bytes(head, tail, label=source, omitted_bytes=omitted)
    if decoded.skipped:
        if not decoded.warnings:
            return None
        return PersonaDocument(kind=kind, text="", source=source, warnings=decoded.warnings)
    warnings = decoded.warnings
    if omitted:
        warnings += (
            f"{source} is {human_size(size)}, more than the {human_size(max_read_bytes)} read "
            f"limit: only its first and last {human_size(len(head))} were read.",
        )
    return PersonaDocument(
        kind=kind,
        text=decoded.text,
        source=source,
        warnings=warnings,
        omitted_bytes=omitted,
        omitted_at=decoded.head_chars if omitted else 0,
    )


def text_for_edit(source: str, data: bytes, *, size: int, max_read_bytes: int) -> str:
    """The whole current text of a file about to be rewritten.

    Raises ``PersonaError`` for a file that cannot be rewritten without losing something:
    larger than ``max_read_bytes``, binary, or not UTF-8.
    """
    if size > max_read_bytes:
        raise PersonaError(
            f"Refusing to edit {source}: it is {human_size(size)}, too large to rewrite safely "
            f"(limit {human_size(max_read_bytes)}).",
            hint="Trim it by hand, e.g. with `jarvis persona edit`.",
        )
    if b"\x00" in data:
        raise PersonaError(
            f"Refusing to edit {source}: it contains NUL bytes (binary or UTF-16).",
            hint="Save it as UTF-8 text first.",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise PersonaError(
            f"Refusing to edit {source}: byte {error.start} is not valid UTF-8, and rewriting "
            "it would lose the undecodable bytes.",
            hint="Fix the file's encoding (save it as UTF-8) first.",
        ) from None
