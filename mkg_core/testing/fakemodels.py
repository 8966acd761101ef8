"""Local stand-ins for the model APIs the real Claude Code and Codex CLIs call, for end-to-end tests.

- :class:`FakeAnthropic` speaks the Anthropic Messages API as Claude Code uses it (``POST
  /v1/messages``, always streamed as server-sent events).
- :class:`FakeResponses` speaks the OpenAI Responses API as Codex uses it (``POST /v1/responses``,
  streamed; MCP tools arrive as ``namespace`` tools).
- :class:`FakeGemini` speaks the Gemini API as Gemini CLI uses it (``POST
  /v1beta/models/<model>:streamGenerateContent?alt=sse``; MCP tools arrive as
  ``mcp_<server>_<tool>`` function declarations).

Both decide from the request, never from a counter, so side requests cannot throw a script off:
a request that carries a tool result gets a text answer quoting it; otherwise, when the newest
user prompt contains a scripted trigger and the scripted tool is offered, the answer calls it;
otherwise a plain text answer. Every request body is logged, so a test can look for what reached
the model (injected memory, the tools offered). Standard library only; binds 127.0.0.1.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class ToolRule:
    """Call ``tool`` (any offered tool whose name ends with it) with ``arguments`` when ``when`` is in
    the newest user prompt, saying ``say`` first when given."""

    when: str
    tool: str
    arguments: dict[str, Any]
    say: str | None = None


@dataclass
class _FakeModel:
    answer: str = "ok"
    rules: list[ToolRule] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    def call_tool(self, when: str, tool: str, *, say: str | None = None, **arguments: Any) -> None:
        self.rules.append(ToolRule(when, tool, arguments, say))

    def bodies(self) -> list[str]:
        """Every request body as JSON text, to search for what reached the model."""
        with self._lock:
            return [json.dumps(r, ensure_ascii=False) for r in self.requests]

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @contextlib.contextmanager
    def running(self) -> Iterator[Any]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_HEAD(self) -> None:
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                self._json(404, {"error": {"type": "not_found", "message": self.path}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._json(400, {"error": {"type": "invalid_request_error", "message": "bad JSON"}})
                    return
                with fake._lock:
                    fake.requests.append(body)
                events = fake.respond(self.path, body)
                if events is None:
                    self._json(200, {"input_tokens": 42, "totalTokens": 42})  # token counts, side requests
                    return
                if isinstance(events, dict):  # a plain JSON answer
                    self._json(200, events)
                    return
                data = "".join(
                    (f"event: {name}\n" if name else "") + f"data: {json.dumps(payload)}\n\n"
                    for name, payload in events
                )
                raw = data.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # the CLIs drop keep-alive sockets when they exit

        self._server = Server(("127.0.0.1", 0), Handler)
        thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def respond(
        self, path: str, body: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]] | dict[str, Any] | None:
        raise NotImplementedError

    def _rule_for(self, prompt: str, tools: list[str]) -> tuple[ToolRule, str] | None:
        for rule in self.rules:
            if rule.when in prompt:
                name = next(
                    (t for t in tools if t == rule.tool or t.endswith(("__" + rule.tool, "_" + rule.tool))),
                    None,
                )
                if name is not None:
                    return rule, name
        return None


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(_text_of(block.get("text") or block.get("content")) for block in content
                         if isinstance(block, dict))  # fmt: skip
    return ""


class FakeAnthropic(_FakeModel):
    """The Anthropic Messages API, streamed, as Claude Code calls it."""

    def env(self) -> dict[str, str]:
        return {
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": "sk-ant-fake-local-test-key",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }

    def respond(self, path: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
        if not path.startswith("/v1/messages") or "count_tokens" in path:
            return None
        messages = [m for m in body.get("messages", []) if m.get("role") == "user"]
        last = messages[-1]["content"] if messages else ""
        blocks = last if isinstance(last, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if results:
            return self._message("text", f"Tool said: {_text_of(results[-1].get('content'))}"[:2000])
        prompt = _text_of(last)
        found = self._rule_for(prompt, [t.get("name", "") for t in body.get("tools", [])])
        if found is not None:
            rule, name = found
            return self._message("tool_use", name, rule.arguments, say=rule.say)
        return self._message("text", self.answer)

    @staticmethod
    def _message(
        kind: str, text: str, arguments: dict[str, Any] | None = None, *, say: str | None = None
    ) -> list[tuple[str, dict[str, Any]]]:
        usage = {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        start = {"type": "message_start", "message": {
            "id": "msg_fake", "type": "message", "role": "assistant", "model": "fake", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": usage}}  # fmt: skip
        if kind == "tool_use":
            block = {"type": "tool_use", "id": "toolu_fake01", "name": text, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(arguments or {})}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": text}
            stop = "end_turn"
        blocks: list[tuple[dict[str, Any], dict[str, Any]]] = []
        if say:
            blocks.append(({"type": "text", "text": ""}, {"type": "text_delta", "text": say}))
        blocks.append((block, delta))
        streamed: list[tuple[str, dict[str, Any]]] = []
        for index, (opened, change) in enumerate(blocks):
            streamed += [
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": opened},
                ),
                ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": change}),
                ("content_block_stop", {"type": "content_block_stop", "index": index}),
            ]
        return [
            ("message_start", start),
            *streamed,
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]


class FakeResponses(_FakeModel):
    """The OpenAI Responses API, streamed, as Codex calls it (MCP tools as namespaces)."""

    def env(self) -> dict[str, str]:
        return {"FAKE_API_KEY": "sk-fake-local-test-key", "GIT_ALLOW_PROTOCOL": "file"}

    def config_toml(self) -> str:
        """The top of a ``config.toml`` pointing Codex at this server."""
        return (
            'model = "fake-model"\nmodel_provider = "fake"\napproval_policy = "never"\n'
            'sandbox_mode = "danger-full-access"\ncheck_for_update_on_startup = false\n\n'
            '[model_providers.fake]\nname = "Fake"\n'
            f'base_url = "{self.base_url}/v1"\nenv_key = "FAKE_API_KEY"\nwire_api = "responses"\n'
            "request_max_retries = 0\nstream_max_retries = 0\n\n[analytics]\nenabled = false\n"
        )

    def respond(self, path: str, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]] | None:
        if not path.startswith("/v1/responses"):
            return None
        items = [i for i in body.get("input", []) if isinstance(i, dict)]
        outputs = [i for i in items if i.get("type") == "function_call_output"]
        if outputs:
            return self._response(
                {
                    "type": "message",
                    "role": "assistant",
                    "id": "msg_1",
                    "content": [
                        {
                            "type": "output_text",
                            "text": f"Tool said: {outputs[-1].get('output')}"[:2000],
                            "annotations": [],
                        }
                    ],
                }
            )
        users = [i for i in items if i.get("type") == "message" and i.get("role") == "user"]
        prompt = _text_of(users[-1].get("content")) if users else ""
        offered: dict[str, str] = {}
        for tool in body.get("tools", []):
            if tool.get("type") == "namespace":
                for inner in tool.get("tools", []):
                    offered[f"{tool['name']}__{inner.get('name')}"] = tool["name"]
            elif tool.get("name"):
                offered[tool["name"]] = ""
        found = self._rule_for(prompt, list(offered))
        if found is not None:
            rule, name = found
            namespace = offered[name]
            item = {"type": "function_call", "id": "fc_1", "call_id": "call_fake01",
                    "name": name[len(namespace) + 2:] if namespace else name,
                    "arguments": json.dumps(rule.arguments)}  # fmt: skip
            if namespace:
                item["namespace"] = namespace
            if rule.say:
                text = {"type": "output_text", "text": rule.say, "annotations": []}
                said = {"type": "message", "role": "assistant", "id": "msg_0", "content": [text]}
                return self._response(said, item)
            return self._response(item)
        return self._response({"type": "message", "role": "assistant", "id": "msg_1", "content": [
            {"type": "output_text", "text": self.answer, "annotations": []}]})  # fmt: skip

    @staticmethod
    def _response(*items: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                 "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}  # fmt: skip
        done = {"id": "resp_1", "status": "completed", "output": list(items), "usage": usage}
        streamed: list[tuple[str, dict[str, Any]]] = []
        for index, item in enumerate(items):
            streamed += [
                (
                    "response.output_item.added",
                    {"type": "response.output_item.added", "output_index": index, "item": item},
                ),
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": index, "item": item},
                ),
            ]
        return [
            ("response.created", {"type": "response.created", "response": {"id": "resp_1"}}),
            *streamed,
            ("response.completed", {"type": "response.completed", "response": done}),
        ]


class FakeGemini(_FakeModel):
    """The Gemini API, streamed, as Gemini CLI calls it (run it with ``-m gemini-2.5-flash``, so that
    every turn is one ``streamGenerateContent``)."""

    model = "gemini-2.5-flash"

    def env(self) -> dict[str, str]:
        return {
            "GEMINI_API_KEY": "fake-local-test-key",
            "GOOGLE_GEMINI_BASE_URL": self.base_url,
            "GEMINI_CLI_TRUST_WORKSPACE": "true",
        }

    @staticmethod
    def settings() -> dict[str, Any]:
        """A ``~/.gemini/settings.json`` for offline runs: an API key (the base URL alone would pick an
        auth type headless runs refuse), no usage statistics, telemetry or update checks."""
        return {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
        }

    def respond(
        self, path: str, body: dict[str, Any]
    ) -> list[tuple[str, dict[str, Any]]] | dict[str, Any] | None:
        route = path.split("?", 1)[0]
        if not route.endswith((":streamGenerateContent", ":generateContent")):
            return None
        config = body.get("generationConfig") or {}
        if config.get("responseMimeType") == "application/json":  # the CLI's own side questions
            schema = config.get("responseJsonSchema") or config.get("responseSchema") or {}
            parts = [{"text": json.dumps(_from_schema(schema))}]
        else:
            parts = self._parts(body)
        answer = {
            "candidates": [
                {"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}
            ],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": self.model,
        }
        return [("", answer)] if route.endswith(":streamGenerateContent") else answer

    def _parts(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        contents = [c for c in body.get("contents", []) if isinstance(c, dict)]
        last = contents[-1].get("parts", []) if contents else []
        responses = [p["functionResponse"] for p in last if isinstance(p, dict) and "functionResponse" in p]
        if responses:
            said = json.dumps(responses[-1].get("response"), ensure_ascii=False)
            return [{"text": f"Tool said: {said}"[:2000]}]
        prompt = "\n".join(p.get("text", "") for p in last if isinstance(p, dict))
        tools = [d.get("name", "") for t in body.get("tools", []) for d in t.get("functionDeclarations", [])]
        found = self._rule_for(prompt, tools)
        if found is None:
            return [{"text": self.answer}]
        rule, name = found
        call = {"functionCall": {"name": name, "args": rule.arguments}}
        return [{"text": rule.say}, call] if rule.say else [call]


def _from_schema(schema: Any) -> Any:
    """A minimal value that satisfies a JSON schema (for the CLI's JSON-mode side questions)."""
    if not isinstance(schema, dict):
        return "ok"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "string")).lower()
    if kind == "object":
        return {key: _from_schema(value) for key, value in (schema.get("properties") or {}).items()}
    if kind == "array":
        return []
    if kind in ("integer", "number"):
        return 1
    if kind == "boolean":
        return False
    return "ok"
