"""A scripted model server for the real agent CLIs (tests/hosts), on loopback.

It speaks the three wire formats the hosts use (facts: ../shared/reference/AGENT-HOSTS.md):
Anthropic's Messages API (Claude Code), OpenAI's Responses API (Codex) and Gemini's
generateContent (Gemini CLI), each streamed as server-sent events.

The script is a JSON list of steps, each a tool call in a host-neutral form:
  {"shell": "git status && git diff"}
  {"read": "/abs/or/relative/path"}
  {"glob": "**/*.rs"}
  {"edit": {"path": "/abs/path", "old": "text", "new": "text"}}   (the host's own edit tool:
      Claude Code's Edit, Gemini CLI's replace, Codex's freeform apply_patch tool)
  {"code": "await tools.exec_command({cmd: 'ls'})"}   (Codex only: its code mode's `exec`)
  {"write": {"path": "/abs/path", "content": "text"}}   (a new file, by the host's own tool:
      Claude Code's Write, Gemini CLI's write_file, and for Codex `apply_patch <<'EOF'`
      through exec_command, as its models write a patch when they use the shell)
The answer to a request is the step whose index is the number of tool results the request's
conversation holds (so a host that retries or calls a side model does not shift the script);
after the last step, a final text. Every request is logged as one JSON line in LOG:
{"path", "results", "last_result"}: the tool results are what the model was told.

usage: model_server.py SCRIPT.json LOG.jsonl   (prints "PORT N" once it listens)
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPT = json.load(open(sys.argv[1]))
LOG = sys.argv[2]
FINAL = "All steps done."

def replace_args(e):
    return {"file_path": e["path"], "old_string": e["old"], "new_string": e["new"]}


def write_args(w):
    return {"file_path": w["path"], "content": w["content"]}


def patch(hunk):
    return "*** Begin Patch\n" + hunk + "*** End Patch\n"


def plus_lines(text):
    return "".join("+" + line + "\n" for line in text.split("\n"))


def codex_edit(e):
    """An edit by Codex's freeform apply_patch tool (its input is the patch itself)."""
    minus = "".join("-" + line + "\n" for line in e["old"].split("\n"))
    return {"input": patch("*** Update File: " + e["path"] + "\n@@\n" + minus + plus_lines(e["new"]))}


def codex_write(w):
    """A new file by `apply_patch <<'EOF'` through the shell, which Codex applies itself."""
    hunk = "*** Add File: " + w["path"] + "\n" + plus_lines(w["content"].rstrip("\n"))
    return {"cmd": "apply_patch <<'EOF'\n" + patch(hunk) + "EOF"}


CLAUDE_TOOLS = {"shell": ("Bash", "command"), "read": ("Read", "file_path"), "glob": ("Glob", "pattern"),
                "edit": ("Edit", replace_args), "write": ("Write", write_args)}
def gemini_replace_args(e):
    return dict(replace_args(e), instruction="Add a function.")


GEMINI_TOOLS = {"shell": ("run_shell_command", "command"), "read": ("read_file", "file_path"),
                "glob": ("glob", "pattern"), "edit": ("replace", gemini_replace_args),
                "write": ("write_file", write_args)}
CODEX_TOOLS = {"shell": ("exec_command", "cmd"), "edit": ("apply_patch", codex_edit),
               "write": ("exec_command", codex_write)}
# Codex's code mode: a script of JavaScript whose `tools.NAME(...)` calls are the tool calls.
CODEX_TOOLS["code"] = ("exec", lambda js: {"input": js})
CODEX_CUSTOM_TOOLS = {"apply_patch", "exec"}


def tool_call(step, table):
    (kind, value), = step.items()
    name, arg = table[kind]
    return name, (arg(value) if callable(arg) else {arg: value})


def text_of(content):
    """The text of a tool result, whichever shape the host sent it in."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(text_of(c) for c in content)
    if isinstance(content, dict):
        for key in ("text", "output", "content", "error", "llmContent"):
            if key in content:
                return text_of(content[key])
        return json.dumps(content)
    return str(content)


def claude_results(body):
    out = []
    for m in body.get("messages", []):
        if isinstance(m.get("content"), list):
            out += [text_of(c.get("content")) for c in m["content"] if c.get("type") == "tool_result"]
    return out


def codex_results(body):
    items = body.get("input", [])
    outputs = ("function_call_output", "custom_tool_call_output")
    return [text_of(i.get("output")) for i in items if isinstance(i, dict) and i.get("type") in outputs]


def gemini_results(body):
    out = []
    for c in body.get("contents", []):
        for p in c.get("parts", []):
            if "functionResponse" in p:
                out.append(text_of(p["functionResponse"].get("response")))
    return out


def sse(events):
    return "".join(
        (f"event: {name}\n" if name else "") + "data: " + json.dumps(data) + "\n\n" for name, data in events
    ).encode()


def claude_answer(step):
    start = {"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": [],
        "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}}
    if step is None:
        block = {"type": "text", "text": ""}
        delta = {"type": "text_delta", "text": FINAL}
        stop = "end_turn"
    else:
        name, args = tool_call(step, CLAUDE_TOOLS)
        block = {"type": "tool_use", "id": "toolu_%d" % id(step), "name": name, "input": {}}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(args)}
        stop = "tool_use"
    return sse([
        ("message_start", start),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ])


def codex_answer(step, n):
    if step is None:
        item = {"type": "message", "role": "assistant", "id": "msg_%d" % n,
                "content": [{"type": "output_text", "text": FINAL, "annotations": []}]}
    else:
        name, args = tool_call(step, CODEX_TOOLS)
        if name in CODEX_CUSTOM_TOOLS:
            item = {"type": "custom_tool_call", "id": "ctc_%d" % n, "call_id": "call_%d" % n, "name": name,
                    "input": args["input"], "status": "completed"}
        else:
            item = {"type": "function_call", "id": "fc_%d" % n, "call_id": "call_%d" % n, "name": name,
                    "arguments": json.dumps(args)}
    resp = {"id": "resp_%d" % n, "object": "response", "status": "completed", "output": [item],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}}}
    return sse([
        ("response.created", {"type": "response.created", "response": {"id": "resp_%d" % n}}),
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
        ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
        ("response.completed", {"type": "response.completed", "response": resp}),
    ])


def gemini_chunk(parts):
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}}


def gemini_answer(step):
    if step is None:
        parts = [{"text": FINAL}]
    else:
        name, args = tool_call(step, GEMINI_TOOLS)
        parts = [{"functionCall": {"name": name, "args": args}}]
    return sse([(None, gemini_chunk(parts))])


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, ctype, data):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.log_request_line([])
        self.reply(404, "application/json", b'{"error": "not here"}')

    do_HEAD = do_GET

    def log_request_line(self, results):
        with open(LOG, "a") as f:
            f.write(json.dumps({"path": self.path, "results": len(results),
                                "last_result": results[-1] if results else None}) + "\n")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {}
        path = self.path.split("?")[0]
        if path.endswith("/messages"):
            results = claude_results(body)
            step = self.step(len(results)) if body.get("tools") else None
            self.log_request_line(results)
            if body.get("stream"):
                return self.reply(200, "text/event-stream", claude_answer(step))
            msg = {"id": "msg_0", "type": "message", "role": "assistant", "model": "claude-test",
                   "content": [{"type": "text", "text": FINAL}], "stop_reason": "end_turn",
                   "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}
            return self.reply(200, "application/json", json.dumps(msg).encode())
        if path.endswith("/responses"):
            results = codex_results(body)
            self.log_request_line(results)
            return self.reply(200, "text/event-stream", codex_answer(self.step(len(results)), len(results)))
        if path.endswith(":generateContent"):
            self.log_request_line(gemini_results(body))
            verdict = json.dumps({"complexity_reasoning": "a test", "complexity_score": 1})
            return self.reply(200, "application/json", json.dumps(gemini_chunk([{"text": verdict}])).encode())
        if path.endswith(":streamGenerateContent"):
            results = gemini_results(body)
            self.log_request_line(results)
            return self.reply(200, "text/event-stream", gemini_answer(self.step(len(results))))
        self.log_request_line([])
        self.reply(404, "application/json", b'{"error": "not here"}')

    @staticmethod
    def step(n):
        return SCRIPT[n] if n < len(SCRIPT) else None


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print("PORT", server.server_address[1], flush=True)
server.serve_forever()
