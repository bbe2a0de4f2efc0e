"""``InMemoryMemory``: a searchable memory that ranks by how often the query's words occur."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from jarvis.domain.json_types import JSONObject
from jarvis.domain.run.contract import MemoryHit

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class StoredMemory:
    id: str
    content: str
    source: str
    metadata: JSONObject


def words(text: str) -> list[str]:
    return [w.casefold() for w in _WORD.findall(text)]


class InMemoryMemory:
    """Keeps entries in a list; a hit is an entry sharing at least one word with the query.

    The score is the number of query-word occurrences in the entry (more matches rank
    first, ties by insertion order), so ranking tests mean the same here as on SQLite.
    """

    def __init__(self) -> None:
        self.entries: list[StoredMemory] = []

    async def store(
        self, content: str, *, source: str = "", metadata: JSONObject | None = None
    ) -> str:
        entry = StoredMemory(uuid.uuid4().hex, content, source, dict(metadata or {}))
        self.entries.append(entry)
        return entry.id

    async def search(self, query: str, *, top_k: int = 5) -> list[MemoryHit]:
        wanted = set(words(query))
        if not wanted or top_k <= 0:
            return []
        scored: list[tuple[float, int, StoredMemory]] = []
        for position, entry in enumerate(self.entries):
            score = sum(1 for w in words(entry.content) if w in wanted)
            if score:
                scored.append((float(score), position, entry))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [
            MemoryHit(content=entry.content, source=entry.source, score=score)
            for score, _, entry in scored[:top_k]
        ]
