"""``InMemoryPersonaStore``: persona files held as bytes in a dict."""

from __future__ import annotations

import threading
from collections.abc import Callable

from jarvis.domain.errors import PersonaError
from jarvis.domain.persona import (
    FILE_NAMES,
    check_persona_name,
    document_from_bytes,
    text_for_edit,
    unknown_persona,
)
from jarvis.domain.ports import PersonaDocument, PersonaFile

_DEFAULT_MAX_READ_BYTES = 64 * 1024


class InMemoryPersonaStore:
    """Behaves like the filesystem store (same decoding, size limits, name rules and
    errors), without touching the disk.

    The back door for tests: :meth:`put` writes a file's bytes (creating a named persona
    when ``persona`` is given), :meth:`add_persona` creates an empty one, :meth:`raw`
    returns a file's bytes, and :attr:`writes` counts the writes made through the port.
    """

    def __init__(self, *, max_read_bytes: int = _DEFAULT_MAX_READ_BYTES) -> None:
        self.max_read_bytes = max_read_bytes
        self._files: dict[tuple[str | None, PersonaFile], bytes] = {}
        self._personas: set[str] = set()
        self._lock = threading.Lock()
        self.writes = 0

    # -- back door -----------------------------------------------------------------------

    def put(self, kind: PersonaFile, content: str | bytes, *, persona: str | None = None) -> None:
        if persona is not None:
            self._personas.add(persona)
        data = content.encode("utf-8") if isinstance(content, str) else content
        self._files[(persona, kind)] = data

    def add_persona(self, name: str) -> None:
        self._personas.add(name)

    def raw(self, kind: PersonaFile, *, persona: str | None = None) -> bytes | None:
        return self._files.get((persona, kind))

    # -- the port ------------------------------------------------------------------------

    def load(self, persona: str | None) -> tuple[PersonaDocument, ...]:
        if persona is not None:
            self._check(persona)
        documents: list[PersonaDocument] = []
        for kind in PersonaFile:
            data = self._files.get((persona, kind))
            if data is None:
                continue
            size = len(data)
            head, tail = data, b""
            if size > self.max_read_bytes:
                half = self.max_read_bytes // 2
                head, tail = data[:half], data[size - half :]
            document = document_from_bytes(
                kind,
                self.location(kind, persona),
                head,
                tail,
                size=size,
                max_read_bytes=self.max_read_bytes,
            )
            if document is not None:
                documents.append(document)
        return tuple(documents)

    def names(self) -> list[str]:
        valid: list[str] = []
        for name in self._personas:
            try:
                valid.append(check_persona_name(name, []))
            except PersonaError:
                continue
        return sorted(valid)

    def location(self, kind: PersonaFile, persona: str | None = None) -> str:
        if persona is None:
            return f"memory://{FILE_NAMES[kind]}"
        self._check(persona)
        return f"memory://personas/{persona}/{FILE_NAMES[kind]}"

    def ensure(self, kind: PersonaFile) -> str:
        with self._lock:
            if (None, kind) not in self._files:
                self._files[(None, kind)] = b""
                self.writes += 1
        return self.location(kind)

    def edit(self, kind: PersonaFile, change: Callable[[str], str]) -> str:
        with self._lock:
            data = self._files.get((None, kind), b"")
            current = text_for_edit(
                self.location(kind), data, size=len(data), max_read_bytes=self.max_read_bytes
            )
            new = change(current)
            if new != current:
                self._files[(None, kind)] = new.encode("utf-8")
                self.writes += 1
            return new

    def _check(self, name: str) -> None:
        existing = self.names()
        check_persona_name(name, existing)
        if name not in self._personas:
            raise unknown_persona(name, existing)
