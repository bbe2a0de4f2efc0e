"""Agent-loop policies: how a question becomes an answer."""
