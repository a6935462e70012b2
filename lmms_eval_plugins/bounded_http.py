"""The one bounded HTTP reader: every exchange the plugin makes (judge, batch, download, doctor) reads
at most ``max_bytes`` of body and ends within ``deadline`` seconds in total, however the bytes trickle.

The client library is the one the installed ``openai`` is built on (``httpx2``, or ``httpx`` for older
``openai`` releases); a transport wrapper bounds each exchange below the client, so a body over the cap
raises :class:`BodyTooLarge` before the rest of it is read (an announced ``Content-Length`` over the cap
before any of it is), in openai's non-streamed calls, its ``with_streaming_response`` calls and
:func:`fetch` alike. The deadline covers connecting, the headers and the body:

* async: the exchange runs inside an anyio cancel scope that ends at the deadline;
* sync: a watchdog thread shuts the exchange's socket down at the deadline (the blocked read then
  returns), so each sync exchange opens its own connection (no keep-alive; it knows its socket).

API clients never follow redirects: a 3xx is :class:`RedirectRefused`, naming only the two hosts (the
credentials and the judged text must not go where a redirect points). Bodies are asked for without
compression; one sent compressed anyway is decoded here, and its decoded size is what is capped.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import IO, Any
from urllib.parse import urlsplit

#: an absolute ``time.monotonic()`` by which the exchange must end, carried by a request's extensions
#: (httpx copies them to the requests of a redirect, so :func:`fetch`'s deadline covers every hop)
UNTIL_EXTENSION = "lmms_eval_plugins.until"
FETCH_MAX_REDIRECTS = 5


class BodyTooLarge(Exception):
    """A body over the cap: announced (``Content-Length``) or received; nothing past the cap is kept."""

    def __init__(self, size: int, limit: int, *, announced: bool, host: str = "") -> None:
        self.size, self.limit, self.announced, self.host = size, limit, announced, host
        what = f"announces {size:,} bytes" if announced else f"went past {limit:,} bytes ({size:,} received)"
        super().__init__(f"the reply{f' from {host}' if host else ''} {what}, over the cap of {limit:,} bytes")


class DeadlinePassed(Exception):
    """An exchange still incomplete at its total deadline (a stalled or trickling peer)."""

    def __init__(self, seconds: float, received: int, host: str = "") -> None:
        self.seconds, self.received, self.host = seconds, received, host
        super().__init__(
            f"no complete reply{f' from {host}' if host else ''} within the {seconds:g} s deadline "
            f"({received:,} body bytes received)"
        )


class RedirectRefused(Exception):
    """An API call answered with a redirect, which is never followed (only the hosts are named)."""

    def __init__(self, status: int, host: str, target_host: str) -> None:
        self.status, self.host, self.target_host = status, host, target_host
        super().__init__(
            f"{host} answered HTTP {status}, a redirect to {target_host or 'an unnamed place'}; API calls "
            "never follow redirects (the key and the judged text stay with the configured host): set the "
            "endpoint's base URL to the address that answers"
        )


def http_library() -> Any:
    """The HTTP client module the installed ``openai`` builds its clients on (``httpx2``, else ``httpx``)."""
    try:
        from openai import _base_client
    except ImportError:  # no openai: downloads still need a client
        _base_client = None
    module = getattr(_base_client, "httpx2", None) or getattr(_base_client, "httpx", None)
    if module is None:
        import httpx as module  # noqa: PLC0415
    return module


def _host(url: Any) -> str:
    try:
        parts = urlsplit(str(url))
        return (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return ""


def _decoder(encoding: str) -> Any:
    """A zlib decompressor for a body sent compressed although identity was asked; None: not compressed."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip", "deflate"):
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # gzip or zlib header, detected
    raise ValueError(f"the server sent a body in the {name!r} encoding, which was not asked for")


class _Exchange:
    """The budget of one exchange: bytes read so far (decoded), and the moment it must end."""

    def __init__(self, request: Any, max_bytes: int, seconds: float) -> None:
        until = request.extensions.get(UNTIL_EXTENSION)
        self.until = until if isinstance(until, (int, float)) else time.monotonic() + seconds
        self.seconds = seconds
        self.max_bytes = max_bytes
        self.host = _host(request.url)
        self.received = 0
        self.expired = False
        self.decoder: Any = None
        self._sockets: list[Any] = []
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None

    def remaining(self) -> float:
        return self.until - time.monotonic()

    def passed(self) -> DeadlinePassed:
        return DeadlinePassed(self.seconds, self.received, self.host)

    def check_announced(self, headers: Any) -> None:
        length = str(headers.get("content-length", "")).strip()
        if length.isdigit() and int(length) > self.max_bytes:
            raise BodyTooLarge(int(length), self.max_bytes, announced=True, host=self.host)

    def take(self, chunk: bytes) -> bytes:
        """``chunk`` decoded, counted against the cap and the deadline."""
        if self.decoder is not None:
            chunk = self.decoder.decompress(chunk, self.max_bytes - self.received + 1)
            if self.decoder.unconsumed_tail:  # more decoded bytes than the cap allows: a bomb is never inflated
                raise BodyTooLarge(self.max_bytes + 1, self.max_bytes, announced=False, host=self.host)
        return self._count(chunk)

    def _count(self, chunk: bytes) -> bytes:
        self.received += len(chunk)
        if self.received > self.max_bytes:
            raise BodyTooLarge(self.received, self.max_bytes, announced=False, host=self.host)
        if self.expired or self.remaining() <= 0:
            raise self.passed()
        return chunk

    def tail(self) -> bytes:
        return self._count(self.decoder.flush()) if self.decoder is not None else b""  # at most zlib's window

    # -- the sync watchdog ----------------------------------------------------------------------
    def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """httpcore's trace hook: remember the socket each new connection opens, for the watchdog."""
        if name.endswith((".connect_tcp.complete", ".connect_unix_socket.complete")):
            stream = info.get("return_value")
            sock = stream.get_extra_info("socket") if stream is not None else None
            with self._lock:
                if sock is not None:
                    self._sockets.append(sock)
                fire = self.expired
            if fire:
                self._shutdown()

    def arm(self) -> None:
        self._timer = threading.Timer(max(0.0, self.remaining()), self._expire)
        self._timer.daemon = True
        self._timer.start()

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
        self._shutdown()

    def _shutdown(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:  # wakes a read blocked on the socket: it returns end-of-file at once
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _prepare(request: Any, exchange: _Exchange, *, sync: bool) -> None:
    request.headers["Accept-Encoding"] = "identity"
    remaining = max(exchange.remaining(), 0.001)
    timeouts = dict(request.extensions.get("timeout") or {})
    for key in ("connect", "read", "write", "pool"):  # no single wait may outlast the deadline either
        value = timeouts.get(key)
        timeouts[key] = remaining if value is None else min(value, remaining)
    request.extensions["timeout"] = timeouts
    if sync:
        earlier = request.extensions.get("trace")

        def trace(name: str, info: Mapping[str, Any]) -> None:
            exchange.trace(name, info)
            if earlier is not None:
                earlier(name, info)

        request.extensions["trace"] = trace


def _answer(lib: Any, request: Any, response: Any, exchange: _Exchange, refuse_redirects: bool) -> None:
    """Checks made on the headers, before any of the body is read."""
    if refuse_redirects and 300 <= response.status_code < 400:
        location = response.headers.get("location", "")
        raise RedirectRefused(response.status_code, exchange.host, _host(location) if location else "")
    exchange.check_announced(response.headers)
    try:
        exchange.decoder = _decoder(response.headers.get("content-encoding", ""))
    except ValueError as exc:
        raise lib.DecodingError(str(exc), request=request) from None


def _decoded_headers(response: Any, exchange: _Exchange) -> Any:
    if exchange.decoder is None:
        return response.headers
    # decoded here: the client must not decode again, and the announced length is the compressed one
    return [
        (k, v) for k, v in response.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")
    ]


def _transports(lib: Any, max_bytes: int, deadline: float, refuse_redirects: bool) -> tuple[type, type]:
    class _SyncStream(lib.SyncByteStream):
        def __init__(self, inner: Any, exchange: _Exchange) -> None:
            self._inner, self._exchange = inner, exchange

        def __iter__(self) -> Iterator[bytes]:
            try:
                for chunk in self._inner:
                    yield self._exchange.take(chunk)
                if self._exchange.expired:  # a body ending with the connection, cut by the watchdog: not whole
                    raise self._exchange.passed()
                yield self._exchange.tail()
            except (BodyTooLarge, DeadlinePassed):
                raise
            except Exception:
                if self._exchange.expired or self._exchange.remaining() <= 0:  # the watchdog cut the socket
                    raise self._exchange.passed() from None
                raise

        def close(self) -> None:
            self._exchange.disarm()
            self._inner.close()

    class _SyncTransport(lib.BaseTransport):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def handle_request(self, request: Any) -> Any:
            exchange = _Exchange(request, max_bytes, deadline)
            if exchange.remaining() <= 0:
                raise exchange.passed()
            _prepare(request, exchange, sync=True)
            exchange.arm()
            try:
                response = self._inner.handle_request(request)
            except Exception:
                exchange.disarm()
                if exchange.expired or exchange.remaining() <= 0:
                    raise exchange.passed() from None
                raise
            try:
                _answer(lib, request, response, exchange, refuse_redirects)
            except BaseException:
                exchange.disarm()
                response.close()
                raise
            return lib.Response(
                response.status_code,
                headers=_decoded_headers(response, exchange),
                stream=_SyncStream(response.stream, exchange),
                extensions=response.extensions,
            )

        def close(self) -> None:
            self._inner.close()

    class _AsyncStream(lib.AsyncByteStream):
        def __init__(self, inner: Any, exchange: _Exchange) -> None:
            self._inner, self._exchange = inner, exchange

        async def __aiter__(self) -> AsyncIterator[bytes]:
            import anyio

            chunks = self._inner.__aiter__()
            while True:
                try:
                    with anyio.fail_after(max(self._exchange.remaining(), 0.0)):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except TimeoutError:
                    raise self._exchange.passed() from None
                yield self._exchange.take(chunk)
            yield self._exchange.tail()

        async def aclose(self) -> None:
            await self._inner.aclose()

    class _AsyncTransport(lib.AsyncBaseTransport):
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        async def handle_async_request(self, request: Any) -> Any:
            import anyio

            exchange = _Exchange(request, max_bytes, deadline)
            _prepare(request, exchange, sync=False)
            try:
                with anyio.fail_after(max(exchange.remaining(), 0.0)):
                    response = await self._inner.handle_async_request(request)
            except TimeoutError:
                raise exchange.passed() from None
            try:
                _answer(lib, request, response, exchange, refuse_redirects)
            except BaseException:
                await response.aclose()
                raise
            return lib.Response(
                response.status_code,
                headers=_decoded_headers(response, exchange),
                stream=_AsyncStream(response.stream, exchange),
                extensions=response.extensions,
            )

        async def aclose(self) -> None:
            await self._inner.aclose()

    return _SyncTransport, _AsyncTransport


def _check_limits(max_bytes: int, deadline: float, timeout: float) -> None:
    if not (isinstance(max_bytes, int) and max_bytes >= 0):
        raise ValueError(f"max_bytes must be a whole number >= 0, got {max_bytes!r}")
    for name, value in (("deadline", deadline), ("timeout", timeout)):
        if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite number of seconds above 0, got {value!r}")


def http_client(
    *, timeout: float, deadline: float, max_bytes: int, asynchronous: bool = False, follow_redirects: bool = False
) -> Any:
    """An ``httpx`` client (of :func:`http_library`) whose every exchange is bounded as this module says.

    The environment's proxies are honoured as the default client does; each of their transports is
    wrapped too. ``follow_redirects``: only for downloads (:func:`fetch`); API clients refuse a 3xx.
    """
    _check_limits(max_bytes, deadline, timeout)
    lib = http_library()
    sync_cls, async_cls = _transports(lib, max_bytes, deadline, refuse_redirects=not follow_redirects)
    # openai's own pool sizes; sync: one connection per exchange, so the watchdog knows the socket it must cut
    limits = lib.Limits(max_connections=1000, max_keepalive_connections=100 if asynchronous else 0)
    kwargs: dict[str, Any] = {"timeout": timeout, "follow_redirects": follow_redirects, "limits": limits}
    if follow_redirects:
        kwargs["max_redirects"] = FETCH_MAX_REDIRECTS
    client = (lib.AsyncClient if asynchronous else lib.Client)(**kwargs)
    wrap = async_cls if asynchronous else sync_cls
    # the default transport and one per environment proxy: all of them bounded, none left plain
    if not hasattr(client, "_transport") or not hasattr(client, "_mounts"):
        raise RuntimeError(
            f"{lib.__name__} {getattr(lib, '__version__', '?')}: no transports to bound (lmms-eval-plugins "
            "supports the httpx layout; check the install: lmms-eval-plugins doctor)"
        )
    client._transport = wrap(client._transport)
    client._mounts = {pattern: (wrap(t) if t is not None else None) for pattern, t in client._mounts.items()}
    return client


def openai_client(
    base_url: str,
    api_key: str,
    *,
    timeout: float,
    deadline: float,
    max_bytes: int,
    max_retries: int = 0,
    asynchronous: bool = False,
) -> Any:
    """An ``openai.OpenAI`` (``AsyncOpenAI`` with ``asynchronous``) whose calls never follow a redirect
    (:class:`RedirectRefused`), read at most ``max_bytes`` of any body (:class:`BodyTooLarge`, raised by
    the call itself, not wrapped by openai, never retried by it) and end each HTTP exchange within
    ``deadline`` seconds (:class:`DeadlinePassed`, likewise). Streamed downloads
    (``client.files.with_streaming_response.content(id)``) are bounded the same way, as they are read."""
    import openai

    http = http_client(timeout=timeout, deadline=deadline, max_bytes=max_bytes, asynchronous=asynchronous)
    cls = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    return cls(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=max_retries, http_client=http)


def fetch(
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    max_bytes: int,
    deadline: float,
    timeout: float,
    sink: IO[bytes] | None = None,
    on_headers: Callable[[int, Mapping[str, str]], None] | None = None,
) -> tuple[int, Mapping[str, str], bytes | None]:
    """One bounded GET for downloads: (status, headers, body). Redirects are followed (at most
    :data:`FETCH_MAX_REDIRECTS`, all within ``deadline``); a non-2xx body is not read.

    With ``sink`` the body is written there as it arrives (the result's body is None), else returned.
    ``on_headers(status, headers)`` sees a 2xx answer before its body is read (e.g. to check a resumed
    range); what it raises ends the exchange. Raises :class:`BodyTooLarge`, :class:`DeadlinePassed`, or
    the client library's ``HTTPError`` / ``InvalidURL`` (a connection error, a timeout of one read, a
    malformed answer, an unusable URL).
    """
    until = time.monotonic() + deadline
    with http_client(timeout=timeout, deadline=deadline, max_bytes=max_bytes, follow_redirects=True) as client:
        request_headers = {"User-Agent": "lmms-eval-plugins", **dict(headers or {})}
        with client.stream("GET", url, headers=request_headers, extensions={UNTIL_EXTENSION: until}) as response:
            answer = dict(response.headers)
            if not 200 <= response.status_code < 300:
                return response.status_code, answer, None
            if on_headers is not None:
                on_headers(response.status_code, answer)
            if sink is None:
                return response.status_code, answer, response.read()
            for chunk in response.iter_raw():  # as each piece arrives (decoded and counted by the transport)
                sink.write(chunk)
            return response.status_code, answer, None


__all__ = [
    "BodyTooLarge",
    "DeadlinePassed",
    "RedirectRefused",
    "FETCH_MAX_REDIRECTS",
    "fetch",
    "http_client",
    "http_library",
    "openai_client",
]
