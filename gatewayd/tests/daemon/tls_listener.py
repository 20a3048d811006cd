"""A TLS listener for the syslog-over-TLS export test (Python's own ssl module, OpenSSL).

    python tls_listener.py CERT KEY OUT

Listens on 127.0.0.1 (any free port), prints `listening PORT` once it accepts, and appends
every byte each TLS connection brings to OUT (octet-counted RFC 5424 frames, as the daemon
sends them), one connection after another. A client whose certificate check fails never
gets past the handshake and brings nothing.
"""
import socket
import ssl
import sys

CERT, KEY, OUT = sys.argv[1:4]
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(CERT, KEY)
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(16)
print("listening", srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    try:
        with ctx.wrap_socket(conn, server_side=True) as tls:
            while True:
                data = tls.recv(65536)
                if not data:
                    break
                with open(OUT, "ab") as f:
                    f.write(data)
    except (ssl.SSLError, OSError):
        pass
