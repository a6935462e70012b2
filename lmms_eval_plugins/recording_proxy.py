"""A loopback recording reverse proxy: what did an API model class actually send?

``check-model`` puts this in front of the user's OpenAI-compatible endpoint for API model classes
(``--model openai`` and any class given ``base_url``): the class is pointed at
``http://127.0.0.1:<port>/...``, every request is forwarded unchanged (method, path, query, body,
headers, ``Authorization`` included) to the real endpoint and its reply sent back unchanged (status,
headers, body). Of each request only a summary is kept in memory: method, path, the upstream status,
the body's size and SHA-256, and for chat-completions bodies the sequence of content items (text,
or the width x height of each ``image_url``, read from the data URL's image header). Headers are
never recorded, logged or written anywhere (the API key travels only in ``Authorization``).

Limits: bodies (request and reply) above ``max_body`` bytes are refused with 413 / 502; no streaming
(a streamed reply is read whole, then sent); an unreachable endpoint is answered with a 502 whose
JSON error says so. Binds 127.0.0.1 only; :meth:`RecordingProxy.stop` (or leaving the ``with``
block) shuts it down, and its threads are daemons, so it never outlives the process.

    with RecordingProxy("https://api.example.com/v1") as proxy:
        ...  # point the client at proxy.base_url
    proxy.records  # [Record(...), ...]
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import http.client
import io
import ipaddress
import json
import socket
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 256 * 1024 * 1024  # bytes; a request of 256 MiB is far above any API's own limit
UPSTREAM_TIMEOUT = 900.0  # seconds; above the OpenAI client's own default read timeout (600 s)

# Connection-level headers a proxy must not forward (RFC 9110 7.6.1), plus the ones it recomputes.
_HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "proxy-connection",
        "host",
        "content-length",
    }
)
_HEADER_PREFIX_CHARS = 1 << 20  # base64 characters decoded to read an image's size (the header is at the start)


# ------------------------------------------------------------------------------------------------ body summaries


def text_signature(texts: Sequence[str]) -> str:
    """A short digest of a request's text parts, in order: how a sent body is matched to the doc it came from."""
    return hashlib.sha1("\x1e".join(texts).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def image_size_from_url(url: Any) -> tuple[int, int] | None:
    """(width, height) of a ``data:image/...;base64,`` URL, from the image's header (None: not a readable data URL)."""
    if not isinstance(url, str) or not url.startswith("data:"):
        return None
    header, _, payload = url.partition(",")
    if ";base64" not in header:
        return None
    from PIL import Image

    for chars in (_HEADER_PREFIX_CHARS, None):  # the header first; the whole image if that was not enough
        part = payload if chars is None or len(payload) <= chars else payload[:chars]
        try:
            with Image.open(io.BytesIO(base64.b64decode(part + "=" * (-len(part) % 4)))) as image:
                return image.size
        except (binascii.Error, OSError, ValueError, SyntaxError):
            if chars is None or len(payload) <= chars:
                return None
    return None


def chat_items(body: Mapping[str, Any]) -> list[Any] | None:
    """A chat-completions body's content items in order: ``"text"``, ``[w, h]`` per image (None when
    its size cannot be read, e.g. an http URL), or the type name of anything else (``"video_url"``...).
    None when the body has no ``messages`` list."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        return None
    items: list[Any] = []
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            items.append("text")
            continue
        for part in content if isinstance(content, list) else []:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                items.append("text")
            elif kind == "image_url":
                image_url = part.get("image_url")
                url = image_url.get("url") if isinstance(image_url, Mapping) else image_url
                size = image_size_from_url(url)
                items.append(list(size) if size else None)
            else:
                items.append(str(kind))
    return items


def chat_texts(body: Mapping[str, Any]) -> list[str]:
    """The text parts of a chat-completions body, in order (string contents count as one part)."""
    texts: list[str] = []
    for message in body.get("messages") or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            texts.append(content)
            continue
        for part in content if isinstance(content, list) else []:
            if isinstance(part, Mapping) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
    return texts


def summarise_body(raw: bytes) -> dict[str, Any] | None:
    """The chat summary of one request body (None: not a JSON chat-completions body)."""
    try:
        body = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(body, Mapping):
        return None
    items = chat_items(body)
    if items is None:
        return None
    return {"model": body.get("model"), "signature": text_signature(chat_texts(body)), "items": items}


@dataclass
class Record:
    """One request that went through the proxy (no headers: they may hold the API key)."""

    n: int
    label: str | None  # the proxy's label when the request arrived (check-model: which lmms-eval run)
    method: str
    path: str  # without the query string (it may hold a key)
    body_bytes: int
    body_sha256: str
    status: int | None = None  # the upstream's status; None when it could not be reached
    error: str | None = None  # why no upstream reply (unreachable, too large)
    chat: dict[str, Any] | None = None  # summarise_body()

    @property
    def is_chat(self) -> bool:
        return self.chat is not None


# ------------------------------------------------------------------------------------------------ the proxy


def sanitise_url(url: str) -> str:
    """scheme://host[:port]/path of a URL: no user info, query or fragment (they may hold credentials)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _is_loopback(host: str | None) -> bool:
    if host in (None, "", "localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:  # a redirect goes back to the client as is
        return None


class RecordingProxy:
    def __init__(
        self, upstream: str, *, max_body: int = MAX_BODY, timeout: float = UPSTREAM_TIMEOUT, trust_env: bool = True
    ) -> None:
        """``upstream``: the real endpoint's base URL (e.g. ``https://api.openai.com/v1``); ``trust_env``:
        reach it through the environment's HTTP(S)_PROXY settings like the OpenAI client does (never
        for a loopback endpoint)."""
        parts = urllib.parse.urlsplit(upstream.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {sanitise_url(upstream)!r}")
        self.upstream = upstream.rstrip("/")
        self._origin = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "", "", ""))
        self._prefix = parts.path.rstrip("/")  # the proxy serves the same paths as the endpoint
        self.max_body = max_body
        self.timeout = timeout
        proxies = None if trust_env and not _is_loopback(parts.hostname) else {}
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies), _NoRedirect())
        self.records: list[Record] = []
        self.label: str | None = None
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> RecordingProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # never log: request lines and headers stay private
                pass

            def setup(self) -> None:
                super().setup()
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def _handle(self) -> None:
                proxy._forward(self)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_OPTIONS = _handle

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="check-model-recording-proxy",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "proxy not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """The URL to give the client instead of the endpoint's (same path)."""
        return f"http://127.0.0.1:{self.port}{self._prefix}"

    def records_for(self, label: str | None) -> list[Record]:
        with self._lock:
            return [r for r in self.records if r.label == label]

    # -- forwarding ---------------------------------------------------------------------------
    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        path = handler.path
        if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
            self._reply_error(handler, 411, "check-model proxy: chunked request bodies are not supported")
            return
        if length > self.max_body:
            handler.close_connection = True  # the body is not read: the connection cannot be reused
            self._record(handler.command, path, b"", None, f"request body of {length} bytes above the proxy's limit")
            self._reply_error(
                handler, 413, f"check-model proxy: request body of {length} bytes above its limit of {self.max_body}"
            )
            return
        raw = handler.rfile.read(length) if length else b""
        record = self._record(handler.command, path, raw, None, None)
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_BY_HOP}
        request = urllib.request.Request(
            self._origin + path,
            data=raw if raw or handler.command in ("POST", "PUT", "PATCH") else None,
            headers=headers,
            method=handler.command,
        )
        try:
            try:
                response = self._opener.open(request, timeout=self.timeout)
            except urllib.error.HTTPError as http_error:  # any non-2xx reply is still the endpoint's reply
                response = http_error
            with response:
                status = response.status if hasattr(response, "status") else response.code
                reply_headers = list(response.headers.items())
                payload = response.read(self.max_body + 1)
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            record.error = f"{type(reason).__name__}: {reason}"[:300]
            self._reply_error(
                handler, 502, f"check-model proxy: endpoint {sanitise_url(self.upstream)} unreachable: {record.error}"
            )
            return
        if len(payload) > self.max_body:
            record.status, record.error = status, "reply above the proxy's limit"
            self._reply_error(handler, 502, f"check-model proxy: reply above its limit of {self.max_body} bytes")
            return
        record.status = status
        try:
            handler.send_response_only(status)
            for key, value in reply_headers:
                if key.lower() not in _HOP_BY_HOP:
                    handler.send_header(key, value)
            handler.send_header("Content-Length", str(len(payload)))
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout)
            handler.close_connection = True

    def _record(self, method: str, path: str, raw: bytes, status: int | None, error: str | None) -> Record:
        chat = None
        if method == "POST" and raw:
            try:
                chat = summarise_body(raw)
            except Exception:  # a summary never breaks forwarding
                chat = None
        with self._lock:
            record = Record(
                n=len(self.records),
                label=self.label,
                method=method,
                path=path.split("?", 1)[0],
                body_bytes=len(raw),
                body_sha256=hashlib.sha256(raw).hexdigest(),
                status=status,
                error=error,
                chat=chat,
            )
            self.records.append(record)
        return record

    @staticmethod
    def _reply_error(handler: BaseHTTPRequestHandler, status: int, message: str) -> None:
        payload = json.dumps({"error": {"message": message, "type": "proxy_error", "code": status}}).encode()
        try:
            handler.send_response_only(status)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(payload)))
            if handler.close_connection:
                handler.send_header("Connection", "close")
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            handler.close_connection = True
