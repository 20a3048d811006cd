"""An OTLP/HTTP logs receiver for the export tests, built on the official OpenTelemetry
protobuf definitions (PyPI `opentelemetry-proto`).

    python otlp_receiver.py MODE PORT OUT

Listens on 127.0.0.1:PORT (0: any free port) and prints `listening PORT` once it accepts.
MODE `ok`: decodes each POSTed ExportLogsServiceRequest, appends one JSON line per log
record to OUT (resource attributes, attributes, body, severity, times, the time the request
arrived) and answers with an
ExportLogsServiceResponse. MODE `garbage`: answers every connection with bytes that are not
HTTP. MODE `reject`: answers every request 400 Bad Request. MODE `silent`: accepts and
never answers.
"""
import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

MODE, PORT, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
LOCK = threading.Lock()


def value(v):
    d = MessageToDict(v)
    return next(iter(d.values()), None)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        now = time.time_ns()
        req = ExportLogsServiceRequest()
        req.ParseFromString(body)
        lines = []
        for rl in req.resource_logs:
            resource = {a.key: value(a.value) for a in rl.resource.attributes}
            for sl in rl.scope_logs:
                for lr in sl.log_records:
                    lines.append(json.dumps({
                        "path": self.path,
                        "content_type": self.headers.get("Content-Type"),
                        "resource": resource,
                        "scope": sl.scope.name,
                        "attributes": {a.key: value(a.value) for a in lr.attributes},
                        "body": lr.body.string_value,
                        "severity_number": lr.severity_number,
                        "severity_text": lr.severity_text,
                        "time_unix_nano": lr.time_unix_nano,
                        "event_name": lr.event_name,
                        "received_unix_nano": now,
                    }))
        with LOCK, open(OUT, "a") as f:
            f.write("".join(line + "\n" for line in lines))
        answer = ExportLogsServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


def raw(answer):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", PORT))
    srv.listen(16)
    print("listening", srv.getsockname()[1], flush=True)
    held = []
    while True:
        conn, _ = srv.accept()
        conn.recv(65536)
        if answer is None:
            held.append(conn)
        else:
            conn.sendall(answer)
            conn.close()


if MODE == "ok":
    server = ThreadingHTTPServer(("127.0.0.1", PORT), Handler)
    print("listening", server.server_address[1], flush=True)
    server.serve_forever()
elif MODE == "garbage":
    raw(b"\x00\x17not http at all\xff\xfe\r\n\r\n")
elif MODE == "reject":
    raw(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 11\r\nConnection: close\r\n\r\nbad request")
elif MODE == "silent":
    raw(None)
else:
    sys.exit(f"unknown mode {MODE}")
