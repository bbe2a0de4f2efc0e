"""``from jarvis.core.events import EventBus``: jarvis's typed event bus."""

from jarvis.domain.run.events import EventBus

__all__ = ["EventBus"]
