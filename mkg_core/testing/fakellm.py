"""A local OpenAI-compatible server with scripted answers, for tests and offline demos.

It serves ``POST /v1/chat/completions`` and ``POST /v1/embeddings`` on 127.0.0.1 and logs every
request. Chat answers come from rules added with :meth:`FakeLLM.reply`: the first rule whose
``when`` text occurs in the request's messages answers (a rule may answer a limited number of
times, fail with an HTTP status, or wait first). A request no rule matches gets HTTP 500, so a
test never passes on an answer it did not script. Embeddings are deterministic hashed
bag-of-stems vectors (a word's first five letters): texts sharing words, or forms of a word
("deploying", "deployment"), are close, and the same text always gives the same vector.

The real litellm client talks to it (``OPENAI_BASE_URL`` = :attr:`FakeLLM.base_url`).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = str | dict[str, Any] | Callable[[dict[str, Any]], str]
_WORD = re.compile(r"[a-z0-9]{3,}")


@dataclass
class Rule:
    answer: Answer
    when: str | None = None
    times: int | None = None
    status: int = 200
    delay: float = 0.0
    used: int = 0

    def matches(self, text: str) -> bool:
        if self.times is not None and self.used >= self.times:
            return False
        return self.when is None or self.when in text


@dataclass
class Logged:
    path: str
    body: dict[str, Any]
    headers: dict[str, str]

    @property
    def text(self) -> str:
        """Everything the request asked: all message contents, or the embedding inputs."""
        if "messages" in self.body:
            return _messages_text(self.body)
        raw = self.body.get("input", [])
        return "\n".join(raw if isinstance(raw, list) else [str(raw)])


@dataclass
class FakeLLM:
    dimensions: int = 64
    rules: list[Rule] = field(default_factory=list)
    log: list[Logged] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None

    # -- scripting ------------------------------------------------------------------------------

    def reply(
        self,
        answer: Answer,
        *,
        when: str | None = None,
        times: int | None = None,
        status: int = 200,
        delay: float = 0.0,
    ) -> None:
        """Answer chat requests containing ``when`` (any request when None) with ``answer``.

        ``answer`` may be text, a dict (sent as JSON text) or a function of the request body.
        """
        with self._lock:
            self.rules.append(Rule(answer, when, times, status, delay))

    def reset(self) -> None:
        with self._lock:
            self.rules.clear()
            self.log.clear()

    def chats(self) -> list[Logged]:
        with self._lock:
            return [entry for entry in self.log if entry.path.endswith("/chat/completions")]

    def embeddings(self) -> list[Logged]:
        with self._lock:
            return [entry for entry in self.log if entry.path.endswith("/embeddings")]

    # -- running --------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        assert self._server is not None, "the server is not running"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def env(self, *, model: str = "openai/mkg-fake-model") -> dict[str, str]:
        """Settings that point MKG's LLM and embeddings at this server."""
        return {
            "LLM_MODEL": model,
            "OPENAI_API_KEY": "sk-fake-local-test-key",
            "OPENAI_BASE_URL": self.base_url,
            "EMBEDDING_MODEL": "openai/text-embedding-3-small",
            "EMBEDDING_DIMENSIONS": str(self.dimensions),
            "MKG_LLM_NUM_RETRIES": "0",
            "MKG_LLM_TIMEOUT": "20",
        }

    def start(self) -> FakeLLM:
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, name="fake-llm", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @contextmanager
    def running(self) -> Iterator[FakeLLM]:
        self.start()
        try:
            yield self
        finally:
            self.stop()

    # -- answering ------------------------------------------------------------------------------

    def _chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any], float]:
        text = _messages_text(body)
        with self._lock:
            rule = next((r for r in self.rules if r.matches(text)), None)
            if rule is not None:
                rule.used += 1
        if rule is None:
            return 500, {"error": {"message": "no scripted reply matches this request", "type": "fake"}}, 0
        if rule.status != 200:
            return (
                rule.status,
                {"error": {"message": f"scripted failure {rule.status}", "type": "fake"}},
                rule.delay,
            )
        answer = rule.answer(body) if callable(rule.answer) else rule.answer
        content = answer if isinstance(answer, str) else json.dumps(answer)
        payload = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model", "fake")),
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
            ],
            "usage": {
                "prompt_tokens": max(1, len(text) // 4),
                "completion_tokens": max(1, len(content) // 4),
                "total_tokens": max(1, len(text) // 4) + max(1, len(content) // 4),
            },
        }
        return 200, payload, rule.delay

    def _embed(self, body: dict[str, Any]) -> dict[str, Any]:
        raw = body.get("input", [])
        inputs = raw if isinstance(raw, list) else [raw]
        dims = int(body.get("dimensions") or self.dimensions)
        data = [
            {"object": "embedding", "index": i, "embedding": hashed_vector(str(text), dims)}
            for i, text in enumerate(inputs)
        ]
        tokens = sum(len(str(text)) // 4 + 1 for text in inputs)
        return {
            "object": "list",
            "data": data,
            "model": str(body.get("model", "fake")),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _messages_text(body: dict[str, Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []))


def hashed_vector(text: str, dims: int) -> list[float]:
    """A unit vector from the text's word stems (feature hashing): shared stems, nearby vectors."""
    vector = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        digest = hashlib.sha256(word[:5].encode()).digest()
        index = int.from_bytes(digest[:4], "big") % dims
        vector[index] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0:
        vector[0], norm = 1.0, 1.0
    return [x / norm for x in vector]


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeLLM

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}")
        except json.JSONDecodeError:
            self._send(400, {"error": {"message": "invalid JSON body"}})
            return
        fake = self.server_fake
        with fake._lock:
            fake.log.append(Logged(self.path, body, {k.lower(): v for k, v in self.headers.items()}))
        if self.path.rstrip("/").endswith("/chat/completions"):
            status, payload, delay = fake._chat(body)
            if delay:
                time.sleep(delay)
            self._send(status, payload)
        elif self.path.rstrip("/").endswith("/embeddings"):
            self._send(200, fake._embed(body))
        else:
            self._send(404, {"error": {"message": f"no route {self.path}"}})

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass
