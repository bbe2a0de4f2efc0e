"""PDF text for the knowledge base, through pypdf (the optional ``pdf`` extra)."""

from jarvis.adapters.pypdf_documents.text import pdf_text

__all__ = ["pdf_text"]
