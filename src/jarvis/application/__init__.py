"""Use cases: what the CLI, the SDK and the HTTP server (``jarvis serve``) ask jarvis to do."""
