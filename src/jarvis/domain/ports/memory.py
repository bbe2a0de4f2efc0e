"""A searchable memory backend (retrieval)."""

from __future__ import annotations

from typing import Protocol

from jarvis.domain.json_types import JSONObject
from jarvis.domain.run.contract import MemoryHit


class MemoryPort(Protocol):
    """A searchable memory backend (retrieval)."""

    async def store(
        self, content: str, *, source: str = "", metadata: JSONObject | None = None
    ) -> str:
        """Index ``content`` and return its id."""
        ...

    async def search(self, query: str, *, top_k: int = 5) -> list[MemoryHit]:
        """The best ``top_k`` hits for ``query``, best first; no hit is an empty list."""
        ...
