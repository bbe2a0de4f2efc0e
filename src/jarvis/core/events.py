"""``from jarvis.core.events import EventBus``: jarvis's typed event bus."""

from jarvis.domain.events import EventBus

__all__ = ["EventBus"]
