"""``jarvis serve``: managed agents over SSE, OpenAI- and Anthropic-compatible endpoints.

Imported only by the ``serve`` command (and tests): the web framework never loads on the
``jarvis ask`` path.
"""
