"""A scripted Anthropic Messages API on loopback, for running the real Claude Code CLI.

``FakeAnthropic`` answers ``POST /v1/messages`` (streaming SSE or plain JSON) in a
background thread. Its model asks for one tool call (``tool_use``), then, when the
next request carries that call's ``tool_result``, ends with a text that quotes the
result, so the test can read what the CLI told the model. Every other request (a
side query without that tool) gets a short text. Each request body is recorded.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FINAL_PREFIX = "FINAL: "


@dataclass
class FakeAnthropic:
    """``tool_name``/``tool_input``: the call the model makes once."""

    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str = "toolu_01askhumantest"
    requests: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self.send_response(404)
                self.send_header("content-length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                size = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(size) or b"{}")
                fake.requests.append({"path": self.path, "body": body})
                if not self.path.startswith("/v1/messages") or "count_tokens" in self.path:
                    self._json({"input_tokens": 10})
                    return
                blocks, stop = fake.reply(body)
                if body.get("stream"):
                    self._sse(blocks, stop)
                else:
                    self._json(_message(blocks, stop))

            def _json(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _sse(self, blocks: list[dict[str, Any]], stop: str) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("cache-control", "no-cache")
                self.end_headers()
                for name, data in _events(blocks, stop):
                    self.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> FakeAnthropic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def reply(self, body: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
        tools = {str(t.get("name")) for t in body.get("tools") or []}
        result = self.tool_result(body)
        if result is not None:
            text = FINAL_PREFIX + json.dumps(result, ensure_ascii=False)
            return [{"type": "text", "text": text}], "end_turn"
        if self.tool_name in tools:
            return [{"type": "tool_use", "id": self.tool_use_id, "name": self.tool_name,
                     "input": self.tool_input}], "tool_use"
        return [{"type": "text", "text": "ok"}], "end_turn"

    def tool_result(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The ``tool_result`` block for our call in the request's last message."""
        messages = body.get("messages") or []
        content = messages[-1].get("content") if messages else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_result" \
                    and block.get("tool_use_id") == self.tool_use_id:
                return block
        return None


def _message(blocks: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {"id": "msg_fake", "type": "message", "role": "assistant", "model": "claude-fake",
            "content": blocks, "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def _events(blocks: list[dict[str, Any]], stop: str) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": _message([], None)})]
    for index, block in enumerate(blocks):
        if block["type"] == "text":
            start: dict[str, Any] = {"type": "text", "text": ""}
            delta: dict[str, Any] = {"type": "text_delta", "text": block["text"]}
        else:
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        out += [("content_block_start", {"type": "content_block_start", "index": index,
                                         "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": index,
                                         "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": index})]
    out += [("message_delta", {"type": "message_delta",
                               "delta": {"stop_reason": stop, "stop_sequence": None},
                               "usage": {"output_tokens": 5}}),
            ("message_stop", {"type": "message_stop"})]
    return out
