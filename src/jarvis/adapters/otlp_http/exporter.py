"""OTLP/HTTP with the JSON encoding, written by hand: one ``POST /v1/traces`` per batch.

No OpenTelemetry package is needed (nor imported) for JSON: the request body is the
``ExportTraceServiceRequest`` of :func:`~jarvis.application.trace_export.to_otlp`, which
collectors accept as ``application/json``. ``http/protobuf`` encodes that same request
with the official ``opentelemetry-proto`` messages (:mod:`.protobuf`, the ``otel`` extra).
Each call has a bounded timeout and reads a bounded reply; a receiver that is down, slow
or refuses is a ``TraceStoreError``. A trace that cannot be sent is left out alone; a lone
surrogate in one (which neither encoding can carry as text) is sent as U+FFFD.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import httpx

from jarvis.application.trace_export import otlp_request, otlp_spans
from jarvis.domain.json_types import JSONValue
from jarvis.domain.traces import Trace, TraceStoreError, times_problem
from jarvis.domain.well_formed import well_formed

MAX_REPLY_BYTES = 64 * 1024


class OtlpHttpExporter:
    """Posts batches of traces to ``url`` (a collector's ``.../v1/traces``), in OTLP's JSON
    encoding, or its protobuf one (``protocol="http/protobuf"``, the ``otel`` extra)."""

    def __init__(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout: float = 5.0,
        protocol: str = "http/json",
    ) -> None:
        self.url = url
        self._client: httpx.Client | None = None
        self._protobuf = protocol == "http/protobuf"
        content_type = "application/x-protobuf" if self._protobuf else "application/json"
        self._headers = {"content-type": content_type, **(headers or {})}
        self._timeout = timeout

    def export(self, traces: Sequence[Trace]) -> list[str]:
        spans: list[JSONValue] = []
        left_out: list[str] = []
        for trace in traces:
            problem = times_problem(trace)
            if problem:
                left_out.append(problem)
            else:
                spans.extend(otlp_spans(trace))
        if not spans:
            return left_out
        body = otlp_request(spans)
        text = json.dumps(body, ensure_ascii=False)
        clean = well_formed(text)  # a lone surrogate (a name an engine sent) as U+FFFD
        if self._protobuf:
            from jarvis.adapters.otlp_http.protobuf import encode

            content = encode(body if clean is text else json.loads(clean))
        else:
            content = clean.encode()
        if self._client is None:
            self._client = httpx.Client(timeout=self._timeout, follow_redirects=False)
        try:
            with self._client.stream(
                "POST", self.url, content=content, headers=self._headers
            ) as response:
                reply = b""
                for chunk in response.iter_bytes():
                    reply += chunk
                    if len(reply) > MAX_REPLY_BYTES:
                        break
        except httpx.HTTPError as exc:
            raise TraceStoreError(f"the OTLP receiver at {self.url} failed: {exc}") from exc
        if response.status_code >= 300:
            raise TraceStoreError(
                f"the OTLP receiver at {self.url} refused the traces (HTTP {response.status_code})"
            )
        return left_out

    def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.close()
