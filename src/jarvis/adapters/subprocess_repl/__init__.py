"""The isolated Python REPL: a sandboxed worker process per session, spoken to over a
typed JSON-lines protocol on its stdio (see ``protocol.py`` and ``worker.py``)."""

from jarvis.adapters.subprocess_repl.factory import SubprocessRepl
from jarvis.adapters.subprocess_repl.session import SubprocessReplSession

__all__ = ["SubprocessRepl", "SubprocessReplSession"]
