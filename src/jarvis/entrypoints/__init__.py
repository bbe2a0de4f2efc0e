"""Entry points: the CLI, the SDK, the HTTP server (``jarvis serve``) and the one
composition root (``container``, put together by ``bootstrap``)."""
