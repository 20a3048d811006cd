"""An OTLP/HTTP logs receiver for the export tests, built on the official OpenTelemetry
protobuf definitions (PyPI `opentelemetry-proto`).

    python otlp_receiver.py MODE PORT OUT [CERT KEY]

Listens on 127.0.0.1:PORT (0: any free port), over HTTPS with CERT and KEY when given, and
prints `listening PORT` once it accepts.
MODE `ok`: decodes each POSTed ExportLogsServiceRequest, appends one JSON line per log
record to OUT (resource attributes, attributes, body, severity, times, the time the request
arrived) and answers with an
ExportLogsServiceResponse. MODE `lag`: the same, but each line holds only what the fleet
bench reads (the record's type, its time and the request's arrival), so that the receiver's
own CPU on the bench's cores is as small as a receiver's can be. Both keep the connection
open between requests (HTTP/1.1), as a collector does. MODE `garbage`: answers every connection with bytes that are not
HTTP. MODE `reject`: answers every request 400 Bad Request. MODE `silent`: accepts and
never answers.
Over gRPC (the official `LogsService`, grpcio from PyPI): MODE `grpc` is `ok`; MODE
`grpc-idle` too, closing connections idle for 500 ms; MODE `grpc-unavailable` answers every
export UNAVAILABLE (to be retried), MODE `grpc-invalid` INVALID_ARGUMENT (not to be retried).
"""
import json
import os
import socket
import ssl
import sys
import threading
import time
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)

MODE, PORT, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
TLS = sys.argv[4:6]
LOCK = threading.Lock()


def value(v):
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "double_value"):
        return getattr(v, kind)
    if kind == "int_value":
        # As protobuf's JSON mapping writes an int64: a string.
        return str(v.int_value)
    d = MessageToDict(v)
    return next(iter(d.values()), None)


def full(path, headers, resource, scope, lr, now):
    return {
        "path": path,
        "content_type": headers.get("Content-Type"),
        "resource": resource,
        "scope": scope,
        "attributes": {a.key: value(a.value) for a in lr.attributes},
        "body": lr.body.string_value,
        "severity_number": lr.severity_number,
        "severity_text": lr.severity_text,
        "time_unix_nano": lr.time_unix_nano,
        "event_name": lr.event_name,
        "received_unix_nano": now,
    }


def lag(lr, now):
    kind = next((a.value.string_value for a in lr.attributes if a.key == "gatewayd.type"), None)
    return {
        "attributes": {"gatewayd.type": kind},
        "time_unix_nano": lr.time_unix_nano,
        "received_unix_nano": now,
    }


def keep(req, path, headers):
    """Appends one line per log record of `req` to OUT."""
    now = time.time_ns()
    lines = []
    for rl in req.resource_logs:
        resource = {a.key: value(a.value) for a in rl.resource.attributes}
        for sl in rl.scope_logs:
            for lr in sl.log_records:
                if MODE == "lag":
                    line = lag(lr, now)
                else:
                    line = full(path, headers, resource, sl.scope.name, lr, now)
                lines.append(json.dumps(line))
    with LOCK, open(OUT, "a") as f:
        f.write("".join(line + "\n" for line in lines))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        req = ExportLogsServiceRequest()
        req.ParseFromString(body)
        keep(req, self.path, self.headers)
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


class Server(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that refused our certificate: nothing to serve.
        pass


def grpc_server():
    # grpcio logs each refused handshake (the TLS test's) on stderr otherwise.
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    import grpc
    from opentelemetry.proto.collector.logs.v1 import logs_service_pb2_grpc

    class Logs(logs_service_pb2_grpc.LogsServiceServicer):
        def Export(self, request, context):
            if MODE == "grpc-unavailable":
                context.abort(grpc.StatusCode.UNAVAILABLE, "receiver is shutting down")
            if MODE == "grpc-invalid":
                context.abort(grpc.StatusCode.INVALID_ARGUMENT, "no such tenant")
            meta = dict(context.invocation_metadata())
            headers = {"Content-Type": meta.get("content-type", "application/grpc")}
            keep(request, "/opentelemetry.proto.collector.logs.v1.LogsService/Export", headers)
            return ExportLogsServiceResponse()

    # As a collector behind a load balancer does: connections idle for 500 ms are closed.
    idle = [("grpc.max_connection_idle_ms", 500)] if MODE == "grpc-idle" else []
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8), options=idle)
    logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)
    if TLS:
        with open(TLS[0], "rb") as c, open(TLS[1], "rb") as k:
            creds = grpc.ssl_server_credentials([(k.read(), c.read())])
        port = server.add_secure_port(f"127.0.0.1:{PORT}", creds)
    else:
        port = server.add_insecure_port(f"127.0.0.1:{PORT}")
    server.start()
    print("listening", port, flush=True)
    server.wait_for_termination()


if MODE.startswith("grpc"):
    grpc_server()
elif MODE in ("ok", "lag"):
    server = Server(("127.0.0.1", PORT), Handler)
    if TLS:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*TLS)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
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
