"""An OTLP/HTTP JSON trace receiver for toolscope's end-to-end test of `proxy --otlp`.

Usage: python otlp_receiver.py OUT.jsonl

Listens on a free 127.0.0.1 port and prints `listening PORT` on stdout. Every
`POST /v1/traces` is decoded with the official `opentelemetry-proto` package:
`google.protobuf.json_format.Parse` into `ExportTraceServiceRequest` (unknown fields, wrong
types or a broken JSON mapping fail the parse). The OTLP specification encodes `traceId` and
`spanId` as hex where the protobuf JSON mapping has base64 for bytes fields ("JSON Protobuf
Encoding"), so those fields are converted hex -> base64 first, as the specification tells
implementations on a standard protobuf JSON parser to do; a value that is not 32 / 16 hex
digits fails.

Each POST appends one JSON line to OUT: {"t": receive time, "ok": true, "spans": [...]} with
per span the ids read back from the decoded message (hex of its bytes), name, kind, times,
attributes (key -> value), event names and links; a POST that does not decode gets HTTP 400
and a line {"ok": false, "error": ...}.
"""

import base64
import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

OUT = sys.argv[1]


def hex_to_b64(value, digits):
    if not isinstance(value, str) or len(value) != digits:
        raise ValueError(f"id {value!r}: expected {digits} hex digits")
    return base64.b64encode(bytes.fromhex(value)).decode()


def convert_ids(req):
    """traceId/spanId/parentSpanId (spans, links) hex -> base64, in place."""
    for rs in req.get("resourceSpans", []):
        for ss in rs.get("scopeSpans", []):
            for span in ss.get("spans", []):
                span["traceId"] = hex_to_b64(span.get("traceId"), 32)
                span["spanId"] = hex_to_b64(span.get("spanId"), 16)
                if "parentSpanId" in span:
                    span["parentSpanId"] = hex_to_b64(span["parentSpanId"], 16)
                for link in span.get("links", []):
                    link["traceId"] = hex_to_b64(link.get("traceId"), 32)
                    link["spanId"] = hex_to_b64(link.get("spanId"), 16)


def any_value(v):
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [any_value(x) for x in v.array_value.values]
    if kind is None:
        return None
    return getattr(v, kind)


def spans_of(msg):
    out = []
    for rs in msg.resource_spans:
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append({
                    "trace": s.trace_id.hex(),
                    "span": s.span_id.hex(),
                    "parent": s.parent_span_id.hex(),
                    "name": s.name,
                    "kind": int(s.kind),
                    "start": s.start_time_unix_nano,
                    "end": s.end_time_unix_nano,
                    "attrs": {a.key: any_value(a.value) for a in s.attributes},
                    "events": [e.name for e in s.events],
                    "links": [[l.trace_id.hex(), l.span_id.hex()] for l in s.links],
                    "status": int(s.status.code),
                    "service": next((any_value(a.value) for a in rs.resource.attributes
                                     if a.key == "service.name"), None),
                })
    return out


def record(line):
    with open(OUT, "a") as f:
        f.write(json.dumps(line) + "\n")


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"path {self.path}")
            ctype = self.headers.get("content-type", "")
            if not ctype.startswith("application/json"):
                raise ValueError(f"content-type {ctype!r}")
            req = json.loads(body)
            convert_ids(req)
            msg = ExportTraceServiceRequest()
            json_format.Parse(json.dumps(req), msg)
            record({"t": time.time(), "ok": True, "spans": spans_of(msg)})
            status, answer = 200, b"{}"
        except Exception as e:  # noqa: BLE001 - every failure is recorded and answered 400
            record({"t": time.time(), "ok": False, "error": f"{type(e).__name__}: {e}"})
            status, answer = 400, json.dumps({"error": str(e)}).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
