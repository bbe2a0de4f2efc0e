"""The behaviour every EmbeddingPort implementation shows (fake and real alike).

Semantic retrieval ranks notes by the dot product of these vectors, so what it relies on is
checked here: unit length (dot product = cosine), one vector per text in order and of one
length, the same vector for the same text whatever batch it is in, and bounded work for any
input a model or a person can produce.
"""

from __future__ import annotations

import asyncio
import math
from typing import Generic, TypeVar

import pytest

from jarvis.domain.ports import EmbeddingPort

EmbeddingsT = TypeVar("EmbeddingsT", bound=EmbeddingPort)

TEXTS = [
    "kiwi banana mango smoothie recipe",
    "a recipe for a kiwi and mango smoothie",
    "the night train to Vienna leaves at ten",
    "",
    "   ",
    "\x00 nul, control \x1b[31m and émoji 🚀",
    "a lone surrogate \ud800 from a JSON escape",
]
TOLERANCE = 1e-5


def dot(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


class EmbeddingContract(Generic[EmbeddingsT]):
    """Subclass with an ``embeddings`` fixture returning the implementation under test."""

    @pytest.fixture
    def embeddings(self) -> EmbeddingsT:
        raise NotImplementedError("subclass must provide the `embeddings` fixture")

    async def test_it_names_its_model(self, embeddings: EmbeddingsT) -> None:
        assert isinstance(embeddings.model_id, str)
        assert embeddings.model_id.strip()

    async def test_no_text_gives_no_vector(self, embeddings: EmbeddingsT) -> None:
        assert await embeddings.embed([]) == []

    async def test_one_unit_vector_of_one_length_per_text(self, embeddings: EmbeddingsT) -> None:
        vectors = await embeddings.embed(TEXTS)
        assert len(vectors) == len(TEXTS)
        assert len({len(v) for v in vectors}) == 1
        assert len(vectors[0]) > 1
        for vector in vectors:
            assert all(isinstance(x, float) and math.isfinite(x) for x in vector)
            assert abs(math.sqrt(dot(vector, vector)) - 1.0) < TOLERANCE

    async def test_a_text_has_the_same_vector_in_any_batch(self, embeddings: EmbeddingsT) -> None:
        batch = await embeddings.embed(TEXTS)
        for text, in_batch in zip(TEXTS, batch, strict=True):
            (alone,) = await embeddings.embed([text])
            assert max(abs(a - b) for a, b in zip(alone, in_batch, strict=True)) < TOLERANCE
        reversed_batch = await embeddings.embed(TEXTS[::-1])
        for one, other in zip(reversed_batch[::-1], batch, strict=True):
            assert max(abs(a - b) for a, b in zip(one, other, strict=True)) < TOLERANCE

    async def test_related_texts_are_closer_than_unrelated(self, embeddings: EmbeddingsT) -> None:
        smoothie, recipe, train = await embeddings.embed(TEXTS[:3])
        assert dot(smoothie, recipe) > dot(smoothie, train) + 0.2
        assert dot(smoothie, smoothie) == pytest.approx(1.0, abs=TOLERANCE)

    async def test_concurrent_calls_match_sequential_ones(self, embeddings: EmbeddingsT) -> None:
        sequential = [await embeddings.embed([text]) for text in TEXTS]
        concurrent = await asyncio.gather(*(embeddings.embed([text]) for text in TEXTS))
        for one, other in zip(sequential, concurrent, strict=True):
            assert max(abs(a - b) for a, b in zip(one[0], other[0], strict=True)) < TOLERANCE

    async def test_a_huge_text_is_embedded_in_bounded_time(self, embeddings: EmbeddingsT) -> None:
        huge = "flood warnings for the river road " * 30_000  # about a megabyte
        (vector,) = await asyncio.wait_for(embeddings.embed([huge]), timeout=30)
        assert abs(math.sqrt(dot(vector, vector)) - 1.0) < TOLERANCE
