"""The one bounded HTTP reader (``lmms_eval_plugins.bounded_http``, issue 36 cases 7 and 11), against
hostile loopback servers: bodies over the cap (announced, unannounced, compressed), trickles of the
headers or the body, redirects, and a proxy from the environment. Sync and async clients alike.

:class:`HostileServer` is shared with ``test_bounded_http_cli.py``: it writes its bodies lazily, so a
200 MB reply costs the test nothing.
"""

from __future__ import annotations

import asyncio
import gzip
import io
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from lmms_eval_plugins import bounded_http
from lmms_eval_plugins.bounded_http import BodyTooLarge, DeadlinePassed, RedirectRefused, fetch, openai_client

MB = 1024 * 1024


class HostileServer:
    """A loopback HTTP server answering every request with ``behaviour(handler)``; records what it got."""

    def __init__(self, behaviour: Callable[[BaseHTTPRequestHandler], None], lifetime: float = 60.0) -> None:
        self.behaviour = behaviour
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []  # method, path, headers, body
        self.sent = 0  # body bytes written, over all requests
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _any(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                server.requests.append((self.command, self.path, dict(self.headers), body))
                self.body = body  # for a behaviour that answers by what was asked
                try:
                    server.behaviour(self)
                except OSError:  # the client hung up: what a bounded reader does
                    self.close_connection = True

            do_GET = do_POST = _any

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._timer = threading.Timer(lifetime, self.stop)
        self._timer.daemon = True

    def __enter__(self) -> HostileServer:
        self._thread.start()
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._timer.cancel()
        self._httpd.shutdown()
        self._httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self._httpd.server_address[1]}"

    def write(self, handler: BaseHTTPRequestHandler, data: bytes) -> None:
        handler.wfile.write(data)
        self.sent += len(data)


# ---- behaviours ------------------------------------------------------------------------------------

COMPLETION_HEAD = (
    b'{"id": "c1", "object": "chat.completion", "created": 1, "model": "m", "choices": [{"index": 0, '
    b'"finish_reason": "stop", "message": {"role": "assistant", "content": "'
)
COMPLETION_TAIL = b'"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}'


def completion(text: str = "OK") -> bytes:
    return COMPLETION_HEAD + json.dumps(text)[1:-1].encode() + COMPLETION_TAIL


def answer(server: HostileServer, body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Callable:
    def behave(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for key, value in (headers or {}).items():
            h.send_header(key, value)
        h.end_headers()
        server.write(h, body)

    return behave


def huge_completion(server: HostileServer, size: int, *, announced: bool) -> Callable:
    """A chat completion whose text is ``size`` bytes of 'x', written 64 KB at a time as the client reads."""

    def behave(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        if announced:
            h.send_header("Content-Length", str(len(COMPLETION_HEAD) + size + len(COMPLETION_TAIL)))
        else:  # the body ends when the connection does
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        server.write(h, COMPLETION_HEAD)
        chunk = b"x" * 65536
        for _ in range(size // len(chunk)):
            server.write(h, chunk)
        server.write(h, COMPLETION_TAIL)

    return behave


def trickle(server: HostileServer, body: bytes, every: float = 0.05, headers_too: bool = False) -> Callable:
    """One byte of the body (or of the headers) each ``every`` seconds: no single read ever times out."""

    def behave(h: BaseHTTPRequestHandler) -> None:
        if headers_too:
            h.wfile.write(b"HTTP/1.1 200 OK\r\n")
            for _ in range(10_000):
                h.wfile.write(b"X-Slow: 1\r\n")
                h.wfile.flush()
                time.sleep(every)
            return
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        for i in range(len(body)):
            server.write(h, body[i : i + 1])
            h.wfile.flush()
            time.sleep(every)

    return behave


def redirect_to(server: HostileServer, location: str, status: int = 307) -> Callable:
    def behave(h: BaseHTTPRequestHandler) -> None:
        h.send_response(status)
        h.send_header("Location", location)
        h.send_header("Content-Length", "0")
        h.end_headers()

    return behave


# ---- the openai client -------------------------------------------------------------------------------


def chat(client: Any, asynchronous: bool) -> str:
    call = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "judge this secret text"}])
    response = asyncio.run(call) if asynchronous else call
    return response.choices[0].message.content


def client_for(server: HostileServer, asynchronous: bool, *, max_bytes: int = MB, deadline: float = 1.0) -> Any:
    return openai_client(
        server.url + "/v1",
        "sk-test-KEY",
        timeout=0.5,
        deadline=deadline,
        max_bytes=max_bytes,
        asynchronous=asynchronous,
    )


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_small_reply_is_read(asynchronous):
    with HostileServer(lambda h: None) as server:
        server.behaviour = answer(server, completion("a verdict"))
        assert chat(client_for(server, asynchronous), asynchronous) == "a verdict"
        assert server.requests[0][2].get("Accept-Encoding") == "identity"


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("announced", [False, True])
def test_a_200_mb_reply_stops_at_the_cap(asynchronous, announced):
    with HostileServer(lambda h: None) as server:
        server.behaviour = huge_completion(server, 200 * MB, announced=announced)
        with pytest.raises(BodyTooLarge) as info:
            chat(client_for(server, asynchronous), asynchronous)
    error = info.value
    assert error.limit == MB and error.announced is announced and server.host in str(error)
    if announced:  # refused on the header: nothing of the body was read (the server fills only its socket buffers)
        assert error.size == len(COMPLETION_HEAD) + 200 * MB + len(COMPLETION_TAIL)
    else:  # read up to the cap and one chunk past it, no further
        assert MB < error.size <= MB + 65536, error.size
    assert server.sent < 20 * MB, server.sent


@pytest.mark.parametrize("asynchronous", [False, True])
@pytest.mark.parametrize("headers_too", [False, True])
def test_a_trickling_reply_ends_at_the_deadline(asynchronous, headers_too):
    with HostileServer(lambda h: None) as server:
        server.behaviour = trickle(server, completion("a verdict"), headers_too=headers_too)
        started = time.monotonic()
        with pytest.raises(DeadlinePassed) as info:
            chat(client_for(server, asynchronous, deadline=1.0), asynchronous)
        elapsed = time.monotonic() - started
    assert 0.9 < elapsed < 2.0, elapsed  # each byte came within the 0.5 s read timeout: only the deadline ends it
    assert "within the 1 s deadline" in str(info.value)


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_redirect_is_refused_naming_only_the_hosts_and_the_other_host_gets_nothing(asynchronous):
    with HostileServer(lambda h: None) as other, HostileServer(lambda h: None) as server:
        other.behaviour = answer(other, completion("1"))
        server.behaviour = redirect_to(server, other.url + "/v1/chat/completions?sig=SIGNED-SECRET")
        with pytest.raises(RedirectRefused) as info:
            chat(client_for(server, asynchronous), asynchronous)
        assert other.requests == []  # neither the key nor the judged text went there
    text = str(info.value)
    assert f"{server.host} answered HTTP 307, a redirect to {other.host}" in text
    assert "SIGNED-SECRET" not in text and "/v1" not in text


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_compressed_reply_is_capped_once_decoded(asynchronous):
    bomb = gzip.compress(completion("x" * (20 * MB)), compresslevel=9)  # ~20 KB on the wire, 20 MB decoded
    small = gzip.compress(completion("a verdict"))
    with HostileServer(lambda h: None) as server:
        server.behaviour = answer(server, small, headers={"Content-Encoding": "gzip"})
        assert chat(client_for(server, asynchronous), asynchronous) == "a verdict"  # sent compressed anyway: decoded
        server.behaviour = answer(server, bomb, headers={"Content-Encoding": "gzip"})
        with pytest.raises(BodyTooLarge):
            chat(client_for(server, asynchronous), asynchronous)
    assert len(bomb) < MB


def test_a_streamed_file_download_is_capped_and_deadlined():
    """How judges/batch.py downloads a batch's output: ``files.with_streaming_response.content``."""
    with HostileServer(lambda h: None) as server:
        server.behaviour = huge_completion(server, 50 * MB, announced=False)
        client = client_for(server, False, max_bytes=2 * MB, deadline=5.0)
        sink = io.BytesIO()
        with pytest.raises(BodyTooLarge):
            with client.files.with_streaming_response.content("file-1") as response:
                for chunk in response.iter_bytes():
                    sink.write(chunk)
        assert sink.tell() <= 2 * MB
        server.behaviour = trickle(server, b"0123456789" * 100)
        started = time.monotonic()
        with pytest.raises(DeadlinePassed):
            with client_for(server, False, deadline=1.0).files.with_streaming_response.content("file-1") as response:
                b"".join(response.iter_bytes())
        assert time.monotonic() - started < 2.0


def test_an_error_body_is_capped_too():
    with HostileServer(lambda h: None) as server:

        def behave(h: BaseHTTPRequestHandler) -> None:
            h.send_response(500)
            h.send_header("Connection", "close")
            h.close_connection = True
            h.end_headers()
            for _ in range(3200):
                server.write(h, b"x" * 65536)

        server.behaviour = behave
        with pytest.raises(BodyTooLarge):
            chat(client_for(server, False), False)
        assert server.sent < 20 * MB


def test_a_proxy_from_the_environment_is_bounded_too(monkeypatch):
    with HostileServer(lambda h: None) as proxy:
        proxy.behaviour = huge_completion(proxy, 50 * MB, announced=False)
        for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        with pytest.raises(BodyTooLarge):
            fetch("http://judge.example.invalid/file", max_bytes=MB, deadline=5.0, timeout=1.0)
        assert proxy.requests and proxy.requests[0][1] == "http://judge.example.invalid/file"  # it went by the proxy


# ---- fetch (downloads) -------------------------------------------------------------------------------


def test_fetch_returns_or_streams_the_body_and_follows_a_redirect_within_the_deadline():
    with HostileServer(lambda h: None) as cdn, HostileServer(lambda h: None) as hub:
        cdn.behaviour = answer(cdn, b"image bytes")
        hub.behaviour = redirect_to(hub, cdn.url + "/blob", status=302)
        status, headers, body = fetch(hub.url + "/img.png", max_bytes=100, deadline=5.0, timeout=1.0)
        assert (status, body, headers["content-length"]) == (200, b"image bytes", "11")
        sink = io.BytesIO()
        seen: list[int] = []
        assert (
            fetch(cdn.url, max_bytes=100, deadline=5.0, timeout=1.0, sink=sink, on_headers=lambda s, h: seen.append(s))[
                2
            ]
            is None
        )
        assert sink.getvalue() == b"image bytes" and seen == [200]
        with pytest.raises(BodyTooLarge):
            fetch(hub.url + "/img.png", max_bytes=5, deadline=5.0, timeout=1.0)
        cdn.behaviour = trickle(cdn, b"0123456789" * 10)
        started = time.monotonic()
        with pytest.raises(DeadlinePassed):  # one deadline for every hop
            fetch(hub.url + "/img.png", max_bytes=1000, deadline=1.0, timeout=0.5)
        assert time.monotonic() - started < 2.0


def test_fetch_does_not_read_an_error_body():
    with HostileServer(lambda h: None) as server:
        server.behaviour = answer(server, b"not found", status=404)
        assert fetch(server.url, max_bytes=100, deadline=5.0, timeout=1.0)[::2] == (404, None)


@pytest.mark.parametrize(
    "kwargs", [{"deadline": float("nan")}, {"deadline": float("inf")}, {"timeout": 0}, {"max_bytes": -1}]
)
def test_limits_must_be_finite_and_positive(kwargs):
    limits = {"timeout": 1.0, "deadline": 1.0, "max_bytes": 10, **kwargs}
    with pytest.raises(ValueError):
        bounded_http.http_client(**limits)


# ---- the judge runtime and doctor's probe, in process ---------------------------------------------------


def _judge_one(server: HostileServer, tmp_path: Any, **settings: Any) -> Any:
    from lmms_eval_plugins.judges import JudgeItem, load_judge
    from lmms_eval_plugins.judges.endpoint import Endpoint
    from lmms_eval_plugins.judges.runtime import JudgeRuntime, RuntimeSettings

    runtime = JudgeRuntime(tmp_path / "cache.sqlite3")
    (outcome,) = runtime.judge_items(
        load_judge("semantic_match"),
        [JudgeItem(question="Q?", prediction="A", reference="A")],
        model="m",
        endpoint=Endpoint(server.url + "/v1", "sk-test-KEY"),
        settings=RuntimeSettings(
            **{"concurrency": 1, "timeout": 0.5, "max_attempts": 2, "retry_base": 0.01, **settings}
        ),
    )
    return outcome, runtime


def test_the_judge_runtime_reads_no_reply_past_its_body_cap_and_does_not_retry(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET", str(tmp_path / "secret"))
    with HostileServer(lambda h: None) as server:
        server.behaviour = huge_completion(server, 200 * MB, announced=False)
        outcome, runtime = _judge_one(server, tmp_path)
        assert len(server.requests) == 1 and server.sent < 20 * MB
    assert outcome.verdict is None and outcome.error.startswith(
        "the judge reply is more than 327680 bytes, over LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES=65536"
    )
    assert list(runtime.report()["failures_by_reason"].values()) == [{"reply too large": 1}]


def test_the_judge_runtime_follows_no_redirect_and_does_not_retry_it(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET", str(tmp_path / "secret"))
    with HostileServer(lambda h: None) as other, HostileServer(lambda h: None) as server:
        other.behaviour = answer(other, completion("1"))
        server.behaviour = redirect_to(server, other.url + "/v1/chat/completions?sig=SIGNED-SECRET")
        outcome, runtime = _judge_one(server, tmp_path)
        assert other.requests == [] and len(server.requests) == 1
    assert outcome.verdict is None and f"{server.host} answered HTTP 307, a redirect to {other.host}" in outcome.error
    assert "SIGNED-SECRET" not in outcome.error and runtime.cache.count() == 0


def test_the_judge_runtime_retries_a_deadline_like_a_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET", str(tmp_path / "secret"))
    with HostileServer(lambda h: None) as server:
        server.behaviour = trickle(server, completion("x" * 400))
        started = time.monotonic()
        outcome, _ = _judge_one(server, tmp_path, deadline=0.8)
        assert len(server.requests) == 2 and time.monotonic() - started < 3.0
    assert "gave up after 2 attempts; last: no complete reply within the 0.8 s deadline" in outcome.error


def test_doctors_probe_follows_no_redirect(monkeypatch):
    from lmms_eval_plugins import doctor

    for name in ("OPENAI_API_BASE", "OPENAI_API_URL"):
        monkeypatch.delenv(name, raising=False)
    with HostileServer(lambda h: None) as other, HostileServer(lambda h: None) as server:
        other.behaviour = answer(other, completion("OK"))
        server.behaviour = redirect_to(server, other.url + "/v1/chat/completions?sig=SIGNED-SECRET")
        monkeypatch.setenv("OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-KEY")
        row = doctor.probe_judge(timeout=3.0)
        assert other.requests == []
    assert row.status == "FAIL" and "RedirectRefused" in row.detail and other.host in row.detail
    assert "SIGNED-SECRET" not in row.detail


@pytest.mark.parametrize(
    "name",
    [
        "LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT",
        "LMMS_EVAL_PLUGINS_JUDGE_DEADLINE",
        "LMMS_EVAL_PLUGINS_JUDGE_RETRY_BASE",
        "LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE",
    ],
)
@pytest.mark.parametrize("raw", ["nan", "inf", "-inf"])
def test_judge_numbers_refuse_nan_and_inf(name, raw):
    from lmms_eval_plugins.judges.base import JudgeConfigError
    from lmms_eval_plugins.judges.runtime import RuntimeSettings, max_error_rate_from_env

    read = max_error_rate_from_env if name.endswith("ERROR_RATE") else RuntimeSettings.from_env
    with pytest.raises(JudgeConfigError, match=f"{name}='{raw}' is not a finite number"):  # before: accepted
        read({name: raw})


def test_the_body_cap_leaves_room_for_the_reply_and_its_envelope():
    from lmms_eval_plugins.judges.runtime import RuntimeSettings

    assert RuntimeSettings().max_body_bytes == 4 * 65536 + 65536
    assert RuntimeSettings.from_env({"LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES": "1000"}).max_body_bytes == 4000 + 65536


def test_a_trickle_without_a_length_cut_at_the_deadline_is_not_taken_for_a_whole_body():
    with HostileServer(lambda h: None) as server:

        def behave(h: BaseHTTPRequestHandler) -> None:  # the body ends when the connection does
            h.send_response(200)
            h.send_header("Connection", "close")
            h.close_connection = True
            h.end_headers()
            for _ in range(1000):
                server.write(h, b"x")
                h.wfile.flush()
                time.sleep(0.05)

        server.behaviour = behave
        with pytest.raises(DeadlinePassed):
            fetch(server.url, max_bytes=10_000, deadline=1.0, timeout=0.5)
