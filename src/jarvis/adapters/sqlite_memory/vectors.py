"""Sentence vectors as float16 blobs, and the numpy scan that finds the nearest.

A scan is one matrix product over every stored vector (normalised, so the product is the
cosine) and a partial sort for the best ``top_k``: linear in the number of chunks, with no
index to build or keep in step. At 100,000 chunks of 384 dimensions the matrix takes
75 MB (float16 on disk) and 150 MB (float32 in memory). The numbers are in the README.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray


def to_blobs(vectors: Sequence[Sequence[float]]) -> list[bytes]:
    """Each vector as float16 bytes (unit length: float16 keeps three significant digits)."""
    import numpy as np

    matrix = np.asarray(vectors, dtype=np.float32)
    if matrix.ndim != 2 or not np.all(np.isfinite(matrix)):
        raise ValueError("vectors must be finite and of one length")
    return [row.tobytes() for row in matrix.astype(np.float16)]


class VectorMatrix:
    """Every stored vector, row ``i`` being chunk ``rowids[i]``."""

    def __init__(self, rowids: NDArray[np.int64], matrix: NDArray[np.float32]) -> None:
        self.rowids = rowids
        self.matrix = matrix

    def nearest(self, vector: Sequence[float], top_k: int) -> list[tuple[int, float]]:
        """The ``top_k`` rows nearest ``vector`` as (rowid, cosine), best first."""
        import numpy as np

        if not len(self.rowids) or top_k <= 0:
            return []
        query = np.asarray(vector, dtype=np.float32)
        if query.shape != (self.matrix.shape[1],):
            raise ValueError(
                f"a {query.shape[0]}-dimension query for {self.matrix.shape[1]}-dimension vectors"
            )
        norm = float(np.linalg.norm(query))
        if norm:
            query = query / norm
        scores = self.matrix @ query
        k = min(top_k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.lexsort((self.rowids[best], -scores[best]))]
        return [(int(self.rowids[i]), float(scores[i])) for i in best]


def load_matrix(db: sqlite3.Connection) -> VectorMatrix:
    """Every vector of ``memory_vectors``, one float32 row each (one dimension for all)."""
    import numpy as np

    rows = db.execute("SELECT rowid, vector FROM memory_vectors ORDER BY rowid").fetchall()
    if not rows:
        return VectorMatrix(np.zeros(0, dtype=np.int64), np.zeros((0, 0), dtype=np.float32))
    width = len(rows[0][1])
    rows = [row for row in rows if len(row[1]) == width]
    rowids = np.fromiter((row[0] for row in rows), dtype=np.int64, count=len(rows))
    flat = np.frombuffer(b"".join(row[1] for row in rows), dtype=np.float16)
    return VectorMatrix(rowids, flat.reshape(len(rows), width // 2).astype(np.float32))
