"""An OTLP/HTTP receiver on 127.0.0.1 (a free port) that keeps every ``POST /v1/traces``
body for the tests to read, decoded from JSON, or, for ``application/x-protobuf``, by the
official ``opentelemetry-proto`` messages (then shown in OTLP's JSON form: hex ids);
``status`` is what it answers. Like a collector, it refuses (HTTP 400, nothing kept) a
body that is not strict JSON: ``NaN`` and ``Infinity`` are not JSON."""

from __future__ import annotations

import base64
import json
import threading
from http.server import BaseHTTPRequestHandler

from tests.support.loopback_engine import LoopbackEngine


def _not_json(constant: str) -> object:
    raise ValueError(f"{constant} is not JSON")


def decoded(body: bytes, content_type: str) -> dict[str, object]:
    if content_type != "application/x-protobuf":
        loaded: dict[str, object] = json.loads(body, parse_constant=_not_json)
        return loaded
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    message = ExportTraceServiceRequest()
    message.ParseFromString(body)  # fails on anything that is not one
    request: dict[str, object] = json_format.MessageToDict(message)
    for resource in request.get("resourceSpans", []):  # type: ignore[attr-defined]
        for scope in resource.get("scopeSpans", []):
            for span in scope.get("spans", []):
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return request


class OtlpReceiver(LoopbackEngine):
    """``with OtlpReceiver() as receiver:`` serves until the block ends."""

    def __init__(self, status: int = 200) -> None:
        super().__init__()
        self.status = status
        self.requests: list[dict[str, object]] = []
        self.paths: list[str] = []
        self.content_types: list[str] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, format: str, *args: object) -> None:
                return

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                content_type = self.headers.get("content-type", "")
                status = receiver.status
                with receiver._lock:
                    receiver.paths.append(self.path)
                    receiver.content_types.append(content_type)
                    try:
                        receiver.requests.append(decoded(body, content_type))
                    except ValueError:
                        status = 400
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self._serve(Handler, "otlp-receiver")

    @property
    def endpoint(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def spans(self) -> list[dict[str, object]]:
        """Every span received, in order."""
        found: list[dict[str, object]] = []
        for request in self.requests:
            for resource in request["resourceSpans"]:  # type: ignore[attr-defined]
                for scope in resource["scopeSpans"]:
                    found.extend(scope["spans"])
        return found
