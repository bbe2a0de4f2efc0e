"""The conversation use case wired to a runtime: shared by the CLI and the SDK.

Imported only by commands and SDK calls that use sessions, so a plain question never loads
the session store, its adapter or sqlite3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from jarvis.application.conversation import ConversationService, HistoryLimits, Sessions

if TYPE_CHECKING:
    from jarvis.application.config import JarvisConfig
    from jarvis.domain.ports import SessionStorePort
    from jarvis.entrypoints.runtime import Runtime


def history_limits(config: JarvisConfig) -> HistoryLimits:
    """``[sessions] history_messages`` and ``history_tokens``."""
    settings = config.sessions
    return HistoryLimits(max_messages=settings.history_messages, max_tokens=settings.history_tokens)


def session_store(runtime: Runtime) -> SessionStorePort:
    """The runtime's session store (``[sessions]``), without choosing or starting an
    engine: ``jarvis sessions`` needs none."""
    return runtime.container.sessions()


def sessions(runtime: Runtime) -> Sessions:
    """Listing, reading and deleting the runtime's sessions."""
    return Sessions(session_store(runtime))


async def conversation_service(runtime: Runtime) -> ConversationService:
    """The conversation use case on the running event loop's ask service."""
    service = await runtime.service()
    return ConversationService(
        service, session_store(runtime), limits=history_limits(runtime.config)
    )
