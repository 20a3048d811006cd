#!/usr/bin/python3
"""A minimal client of `gatewayd serve`, standard library only (docs/PROTOCOL.md).

    python3 examples/client.py SOCKET TOOL [ARGUMENTS_JSON]

Opens a session, asks for a decision on one call, and when it is allowed "runs" the tool
(here: a canned text), reports the output, and prints what the model may see. A real front
end runs the tool with the arguments (and credentials) the daemon hands back.
"""
import json
import socket
import sys


class Gatewayd:
    """One connection; one request at a time, answered in order."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self.file = self.sock.makefile("rwb")
        self.next_id = 1

    def call(self, method, params=None):
        request = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if params is not None:
            request["params"] = params
        self.next_id += 1
        # One message per line: json.dumps never writes a raw newline.
        self.file.write(json.dumps(request).encode() + b"\n")
        self.file.flush()
        line = self.file.readline()
        if not line:
            raise ConnectionError("the daemon closed the connection")
        answer = json.loads(line)
        if "error" in answer:
            err = answer["error"]
            raise RuntimeError(f"{method}: {err['message']} (code {err['code']})")
        return answer["result"]


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, tool = sys.argv[1], sys.argv[2]
    arguments = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
    gw = Gatewayd(path)
    print(f"protocol {gw.call('hello')['protocol']}")
    session = gw.call("session/open", {"user": "example"})["session"]
    try:
        v = gw.call("call/decide", {"session": session,
                                    "call": {"tool": tool, "arguments": arguments}})
        print(f"decision: {v['decision']} ({v['reason']})")
        print(f"message: {v['message']}")
        if v["decision"] == "allow":
            # Run the tool here with v["arguments"] (paths made canonical) and
            # v.get("credentials"); this example pretends it printed a line.
            out = gw.call("call/output", {"session": session, "tool": tool,
                                          "output": f"example output of {tool}"})
            print(f"output for the model: {out.get('output', out.get('error'))}")
            print(f"untrusted leg: {out['legs']['untrusted']}")
        elif v["decision"] == "hold":
            print(f"ask a person: gatewayd approvals approve {v['approval_id']}")
    finally:
        gw.call("session/close", {"session": session})


if __name__ == "__main__":
    main()
