"""The shipped persona-store fake passes the persona-store contract."""

from __future__ import annotations

import pytest

from contracts.persona_store_contract import PersonaStoreContract
from jarvis.domain.ports import PersonaFile
from jarvis.testing import InMemoryPersonaStore


class TestInMemoryPersonaStore(PersonaStoreContract[InMemoryPersonaStore]):
    @pytest.fixture
    def store(self) -> InMemoryPersonaStore:
        return InMemoryPersonaStore(max_read_bytes=self.READ_LIMIT)

    def put(
        self,
        store: InMemoryPersonaStore,
        kind: PersonaFile,
        content: str | bytes,
        persona: str | None = None,
    ) -> None:
        store.put(kind, content, persona=persona)

    def raw(
        self, store: InMemoryPersonaStore, kind: PersonaFile, persona: str | None = None
    ) -> bytes | None:
        return store.raw(kind, persona=persona)

    def make_persona(self, store: InMemoryPersonaStore, name: str) -> None:
        store.add_persona(name)
