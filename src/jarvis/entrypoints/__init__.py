"""Entry points: the CLI, the SDK, the HTTP API and the one composition root."""
