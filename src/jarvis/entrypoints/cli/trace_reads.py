"""How ``jarvis traces`` and ``jarvis stats`` read the trace store: the newest traces, one
trace's stored record, and a store that cannot be read reported as exit code 7.

Loaded when one of those commands runs: ``jarvis --help`` imports every command module
(:mod:`jarvis.entrypoints.cli.traces` among them), not this one.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from jarvis.domain.json_types import JSONValue
from jarvis.domain.ports import TraceStorePort
from jarvis.domain.traces import Trace, TraceQuery, TraceStoreError, trace_to_record
from jarvis.entrypoints.cli.errors import EXIT_STORE_DAMAGED, guarded, write_stderr


def read_reported(body: Callable[[], None], *, verbose: bool) -> int:
    """``guarded``, with a store that cannot be read reported as exit code 7."""
    unreadable: list[str] = []

    def reading() -> None:
        try:
            body()
        except TraceStoreError as exc:
            unreadable.append(str(exc))

    code = guarded(reading, verbose=verbose)
    if unreadable:
        write_stderr(f"jarvis: the trace store cannot be read: {unreadable[0]}\n")
        return EXIT_STORE_DAMAGED
    return code


def newest(
    store: TraceStorePort,
    *,
    since: float | None,
    agent: str | None = None,
    failed_only: bool = False,
    limit: int,
) -> Sequence[Trace]:
    """The newest traces (at most ``limit``) since ``since`` (seconds since the epoch)."""
    return store.list(TraceQuery(since=since, agent=agent, failed_only=failed_only, limit=limit))


def trace_json(trace: Trace) -> JSONValue:
    """``trace`` as the record the store keeps (``jarvis traces show --json``)."""
    value: JSONValue = json.loads(trace_to_record(trace))
    return value
