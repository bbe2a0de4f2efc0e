"""``j.memory.search()`` hits and ``j.memory.stats()`` read as mappings too, as OpenJarvis's
are (``r["score"]``, ``r["source"]``, ``stats["backend"]``, ``stats.get("count")``): the
typed values stay jarvis's, with OpenJarvis's keys on top, so its samples run unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields

from jarvis.domain.json_types import JSONObject, JSONValue
from jarvis.domain.knowledge import KnowledgeStats
from jarvis.domain.run.contract import MemoryHit


class _Mapping:
    """``value[key]``, ``get``, ``in``, iteration, ``len``, ``keys``, ``values`` and
    ``items`` over :meth:`to_json`: what code written for OpenJarvis's plain dicts does
    with them (``if "score" in hit``, ``dict(stats)``)."""

    def to_json(self) -> JSONObject:
        raise NotImplementedError

    def __getitem__(self, key: str) -> JSONValue:
        return self.to_json()[key]

    def get(self, key: str, default: JSONValue = None) -> JSONValue:
        return self.to_json().get(key, default)

    def keys(self) -> list[str]:
        return list(self.to_json())

    def values(self) -> list[JSONValue]:
        return list(self.to_json().values())

    def items(self) -> list[tuple[str, JSONValue]]:
        return list(self.to_json().items())

    def __contains__(self, key: object) -> bool:
        return key in self.to_json()

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchHit(MemoryHit, _Mapping):
    """A :class:`MemoryHit`; as a mapping: ``content``, ``score``, ``source`` and
    ``metadata`` (``line``, ``end_line``, ``citation``), OpenJarvis's keys."""

    @classmethod
    def of(cls, hit: MemoryHit) -> SearchHit:
        return cls(**{f.name: getattr(hit, f.name) for f in fields(MemoryHit)})

    def to_json(self) -> JSONObject:
        return {
            "content": self.content,
            "score": self.score,
            "source": self.source,
            "metadata": {"line": self.line, "end_line": self.end_line, "citation": self.citation},
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryStats(KnowledgeStats, _Mapping):
    """:class:`KnowledgeStats`; as a mapping, its fields plus OpenJarvis's ``backend``
    (``sqlite``) and ``count`` (the chunks)."""

    @classmethod
    def of(cls, stats: KnowledgeStats) -> MemoryStats:
        return cls(**{f.name: getattr(stats, f.name) for f in fields(KnowledgeStats)})

    def to_json(self) -> JSONObject:
        values: JSONObject = {"backend": "sqlite", "count": self.chunks}
        values.update(asdict(self))
        return values
