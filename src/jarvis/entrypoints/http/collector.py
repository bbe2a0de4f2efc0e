"""The pace of the garbage collector in a process that ``jarvis serve`` owns.

Why: Python collects its youngest generation every 700 new container objects, and each
collection walks every young object still alive. A server answering 50 requests at once
holds the objects of all of them (messages, agents, engine requests, replies), so it
collected several times per request and walked the same in-flight objects again and again:
measured at 50 concurrent non-streamed requests, about 7 % of the server's CPU per request.
Collecting the youngest generation every :data:`YOUNG_THRESHOLD` objects instead takes most
of that back, and only delays freeing cycles: objects without cycles are freed at once by
reference counting all the same, and those with cycles are a few thousand objects more at
most. Only the processes ``jarvis serve`` starts are changed (one process, or each of its
workers): an application that embeds jarvis keeps its own collector settings.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""New container objects between two collections of the youngest generation (Python's
default is 700)."""


def pace_for_serving() -> None:
    """Collect the youngest generation every :data:`YOUNG_THRESHOLD` new objects; the
    older generations keep their pace relative to it."""
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, oldest)
