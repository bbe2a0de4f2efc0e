"""PDF text for the knowledge base, through pypdf (the optional ``pdf`` extra), read in a
child process bounded in CPU, memory and time."""

from jarvis.adapters.pypdf_documents.text import PdfLimits, pdf_text

__all__ = ["PdfLimits", "pdf_text"]
