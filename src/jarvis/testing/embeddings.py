"""``WordHashEmbeddings``: a deterministic stand-in for a sentence-embedding model.

Each word is hashed into one of ``dimensions`` buckets and the counts normalised to unit
length, so texts sharing words are similar and texts sharing none are orthogonal (a text
without words counts as the one word ``""``, so every vector has unit length). Enough to
test what semantic retrieval does with similarities, not to judge meaning.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Sequence

_WORD = re.compile(r"\w+", re.UNICODE)


class WordHashEmbeddings:
    def __init__(self, dimensions: int = 256) -> None:
        self.dimensions = dimensions
        self.calls: list[list[str]] = []

    @property
    def model_id(self) -> str:
        return "word-hash"

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        self.calls.append(list(texts))
        vectors: list[tuple[float, ...]] = []
        for text in texts:
            counts = [0.0] * self.dimensions
            for word in _WORD.findall(text.casefold()) or [""]:
                digest = hashlib.blake2b(word.encode(), digest_size=4).digest()
                counts[int.from_bytes(digest, "big") % self.dimensions] += 1.0
            norm = math.sqrt(sum(c * c for c in counts)) or 1.0
            vectors.append(tuple(c / norm for c in counts))
        return vectors
