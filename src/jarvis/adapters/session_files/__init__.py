"""Conversation history stored as one JSON-lines file per session."""
