"""Use cases: what the CLI, the SDK and the HTTP API ask jarvis to do."""
