"""A loopback OpenAI-compatible chat-completions server for judge tests and benchmarks.

Binds 127.0.0.1 only, records every request body, and answers each request through a scriptable
``behaviour(request) -> Reply | None`` (None: the canned verdict computed from the request).
Faults: any status with any headers (429 + Retry-After, 500, 401...), latency, sleeping past the
client's timeout, garbage bodies, unparseable replies.  The server stops itself after ``lifetime``
seconds at the latest.

    with JudgeServer(latency=0.2) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="k")
"""

from __future__ import annotations

import json
import re
import socket
import string
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: the API key the judge tests use (tests check it never leaks into caches, reports or logs)
TEST_API_KEY = "sk-test-SECRET-0123456789abcdef"

_FIELD = re.compile(r"<<<BEGIN (\w+)>>>\n(.*?)\n?<<<END \1>>>", re.DOTALL)
# the verdict tag a rubric request asks for (the last such tag of its first user message)
_SCORE_TAG = re.compile(r"<(score-[0-9a-f]+)></score-[0-9a-f]+>")


@dataclass
class Reply:
    """How to answer one request."""

    status: int = 200
    content: str | None = None  # assistant text, wrapped in a chat.completion body
    raw: bytes | str | None = None  # a raw body instead (garbage, error JSON)
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0  # extra seconds before answering (on top of the server's latency)
    usage: tuple[Any, Any] = (42, 3)  # any JSON numbers: hostile judges send negative or absurd counts
    trickle: float = 0.0  # seconds between the bytes of the body (a judge that never trips a per-read timeout)


@dataclass
class Request:
    n: int  # 0-based number of this request on the server
    attempt: int  # earlier requests for the same item (same first two messages): 0 on the first try
    body: dict[str, Any]
    headers: dict[str, str]
    path: str

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])

    @property
    def fields(self) -> dict[str, str]:
        return data_fields(self.body)

    @property
    def is_reask(self) -> bool:
        return len(self.messages) > 2


Behaviour = Callable[[Request], "Reply | None"]


# ---- canned verdicts ---------------------------------------------------------------------------


def data_fields(body: dict[str, Any]) -> dict[str, str]:
    """The delimited data fields of the first user message of a request body."""
    for message in body.get("messages") or []:
        if message.get("role") == "user" and "<<<BEGIN" in str(message.get("content")):
            return {name: value for name, value in _FIELD.findall(str(message["content"]))}
    return {}


def _norm(text: str) -> str:
    text = text.lower().translate(str.maketrans({c: " " for c in string.punctuation}))
    return " ".join(text.split())


def canned_binary(fields: dict[str, str]) -> str:
    return "1" if _norm(fields.get("PREDICTED_ANSWER", "")) == _norm(fields.get("GROUND_TRUTH_ANSWER", "")) else "0"


def canned_rubric_lists(fields: dict[str, str]) -> tuple[list[bool], list[bool]]:
    points = [re.sub(r"^\d+\.\s*", "", line) for line in fields.get("SCORING_POINTS", "").splitlines() if line.strip()]
    output = set(_norm(fields.get("MODEL_OUTPUT", "")).split())
    wrong = "wrong" in output
    coverage = [all(w in output for w in _norm(p).split() if len(w) > 3) for p in points]
    correctness = [c and not wrong for c in coverage]
    return coverage, correctness


def score_tag(body: dict[str, Any]) -> str:
    """The verdict tag name the request asks for (``score-NONCE``), ``score`` if it names none."""
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            tags = _SCORE_TAG.findall(str(message.get("content")))
            return tags[-1] if tags else "score"
    return "score"


def score_block(body: dict[str, Any], verdict: Any) -> str:
    """``verdict`` (JSON-encoded unless text) wrapped in the verdict tags of the request."""
    tag = score_tag(body)
    text = verdict if isinstance(verdict, str) else json.dumps(verdict)
    return f"<{tag}>{text}</{tag}>"


def retag(text: str, tag: str) -> str:
    """``text`` with its exact ``<score>``/``</score>`` tags renamed to ``tag`` (tests build replies with
    the plain tags and send them with the request's nonce tag); other spellings are left as they are."""
    return text.replace("<score>", f"<{tag}>").replace("</score>", f"</{tag}>")


def canned_content(body: dict[str, Any]) -> str:
    fields = data_fields(body)
    if "SCORING_POINTS" in fields:
        coverage, correctness = canned_rubric_lists(fields)
        return score_block(body, {"coverage": coverage, "correctness": correctness})
    return canned_binary(fields)


def completion_body(content: str, model: str, usage: tuple[Any, ...], n: int) -> dict[str, Any]:
    """A chat.completion; ``usage`` is (prompt, completion[, cached prompt]) tokens."""
    body = {
        "id": f"chatcmpl-test-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": usage[0] + usage[1]},
    }
    if len(usage) > 2:
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": usage[2]}
    return body


# ---- fault helpers -----------------------------------------------------------------------------


def rate_limited(retry_after: float = 0.05) -> Reply:
    return Reply(
        status=429,
        raw=json.dumps({"error": {"message": "rate limited", "type": "rate_limit"}}),
        headers={"Retry-After": f"{retry_after:g}"},
    )


def server_error(status: int = 500) -> Reply:
    return Reply(status=status, raw=json.dumps({"error": {"message": "internal error", "type": "server_error"}}))


def client_error(status: int) -> Reply:
    return Reply(
        status=status, raw=json.dumps({"error": {"message": f"client error {status}", "type": "invalid_request_error"}})
    )


def sleep_past(seconds: float) -> Reply:
    """Answer only after ``seconds`` (set it above the client's timeout)."""
    return Reply(delay=seconds, content="1")


def garbage_body() -> Reply:
    return Reply(raw=b"\x00not json at all{{{", content_type="application/json")


def unparseable(content: str = "I am not sure, it depends.") -> Reply:
    return Reply(content=content)


# ---- the server --------------------------------------------------------------------------------


class JudgeServer:
    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        latency: float = 0.0,
        lifetime: float = 300.0,
        require_key: str | None = None,
    ) -> None:
        self.behaviour = behaviour
        self.latency = latency
        self.lifetime = lifetime
        self.require_key = require_key
        self.requests: list[dict[str, Any]] = []  # every request body, in arrival order
        self.trickles_started = 0  # trickled bodies begun, and sent to the end (the client waited for all of it)
        self.trickles_finished = 0
        self.request_headers: list[dict[str, str]] = []
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> JudgeServer:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def setup(self) -> None:
                super().setup()
                # headers and body go out in separate writes: without this, Nagle's algorithm and the
                # client's delayed ACK add ~40 ms to every keep-alive response
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:
                status, payload, ctype = server._get(self.path)
                self._send(status, payload, ctype, {})

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, json.JSONDecodeError):
                    body = {"_raw": raw.decode("utf-8", "replace")}
                reply = server._handle(body, dict(self.headers.items()), self.path)
                if reply is None:  # the server is stopping
                    self.close_connection = True
                    return
                if reply.raw is not None:
                    payload = reply.raw.encode("utf-8") if isinstance(reply.raw, str) else reply.raw
                else:
                    model = str(body.get("model", "judge-test"))
                    payload = json.dumps(
                        completion_body(reply.content or "", model, reply.usage, len(server.requests))
                    ).encode()
                try:
                    self._send(reply.status, payload, reply.content_type, reply.headers, reply.trickle)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
                    self.close_connection = True

            def _send(
                self, status: int, payload: bytes, ctype: str, headers: dict[str, str], trickle: float = 0.0
            ) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                if trickle <= 0:
                    self.wfile.write(payload)
                    return
                server.trickles_started += 1
                for i in range(len(payload)):  # one byte at a time, until the client hangs up
                    if server._stop.wait(trickle):
                        return
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
                server.trickles_finished += 1

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        self._timer = threading.Timer(self.lifetime, self.stop)
        self._timer.daemon = True
        self._timer.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> JudgeServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- info ---------------------------------------------------------------------------------
    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def n_requests(self) -> int:
        with self._lock:
            return len(self.requests)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.request_headers.clear()
            self._attempts.clear()

    # -- handling -----------------------------------------------------------------------------
    def _get(self, path: str) -> tuple[int, bytes, str]:
        """(status, body, content type) of a GET (tests/batch_server.py adds the Batch API's)."""
        if path.rstrip("/").endswith("/models"):
            return (
                200,
                json.dumps({"object": "list", "data": [{"id": "judge-test", "object": "model"}]}).encode(),
                "application/json",
            )
        return 404, b'{"error": {"message": "not found"}}', "application/json"

    def _handle(self, body: dict[str, Any], headers: dict[str, str], path: str) -> Reply | None:
        item_key = json.dumps((body.get("messages") or [])[:2], sort_keys=True)
        with self._lock:
            n = len(self.requests)
            self.requests.append(body)
            self.request_headers.append(headers)
            attempt = self._attempts.get(item_key, 0)
            self._attempts[item_key] = attempt + 1
        request = Request(n=n, attempt=attempt, body=body, headers=headers, path=path)
        if self.require_key is not None:
            auth = {k.lower(): v for k, v in headers.items()}.get("authorization", "")
            if auth != f"Bearer {self.require_key}":
                return client_error(401)
        if not path.rstrip("/").endswith("/chat/completions"):
            return client_error(404)
        reply = self.behaviour(request) if self.behaviour is not None else None
        if reply is None:
            reply = Reply(content=canned_content(body))
        wait = self.latency + reply.delay
        if wait > 0 and self._stop.wait(wait):
            return None
        return reply
