"""The OTLP request in its protobuf encoding, built by the official ``opentelemetry-proto``
messages (the ``otel`` extra): imported only when ``http/protobuf`` is asked for.

OTLP's JSON encoding is protobuf's JSON mapping with one difference: trace and span ids
are hex, where protobuf's mapping of ``bytes`` is base64. They are converted, then
:func:`google.protobuf.json_format.ParseDict` checks every field against the schema (an
unknown field or a wrong type fails) and builds the ``ExportTraceServiceRequest``.
"""

from __future__ import annotations

import base64
import copy
from typing import cast

from jarvis.domain.json_types import JSONObject
from jarvis.domain.traces import TraceStoreError

_IDS = ("traceId", "spanId", "parentSpanId")
EXTRA = "pip install 'jarvis[otel]'"


def base64_ids(body: JSONObject) -> JSONObject:
    """``body`` (OTLP JSON) with its span and trace ids in base64, as protobuf reads bytes."""
    converted = copy.deepcopy(body)
    for resource in cast(list[JSONObject], converted.get("resourceSpans", [])):
        for scope in cast(list[JSONObject], resource.get("scopeSpans", [])):
            for span in cast(list[JSONObject], scope.get("spans", [])):
                for key in _IDS:
                    value = span.get(key)
                    if isinstance(value, str) and value:
                        span[key] = base64.b64encode(bytes.fromhex(value)).decode()
    return converted


def encode(body: JSONObject) -> bytes:
    """``body`` (an OTLP ``ExportTraceServiceRequest`` in JSON) as protobuf bytes."""
    try:
        from google.protobuf import json_format
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )
    except ImportError as exc:
        raise TraceStoreError(
            f"OTLP over http/protobuf needs the opentelemetry-proto package ({EXTRA})"
        ) from exc
    message = ExportTraceServiceRequest()
    json_format.ParseDict(base64_ids(body), message)
    return bytes(message.SerializeToString())
