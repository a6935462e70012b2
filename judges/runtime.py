"""The judge runtime: endpoint configuration, cached and concurrent calls, retries, accounting.

One :class:`JudgeRuntime` per process (``get_runtime()``); it outlives the task ``utils.py`` modules,
which lmms-eval re-executes per task.  Calls go through the ``openai`` client (``AsyncOpenAI``, its
own retries switched off) to any OpenAI-compatible endpoint; retries, backoff and the decision of
what to retry are ours, so they are tested.

Fault policy
  * 429, 408, 409, 5xx, timeouts, connection errors and malformed bodies are retried with
    exponential backoff and full jitter, honouring ``Retry-After`` / ``retry-after-ms``.
  * 400, 401, 403, 404, 422 and other 4xx are not retried.  401/403/404 concern the endpoint, key
    or model rather than the sample, so after one of them the other pending calls of the batch are
    not attempted (they become judge errors naming the first failure).
  * A reply without a readable verdict is answered with a corrective follow-up (bounded re-ask).
  * A verdict that still fails makes the sample a judge error (``JudgeOutcome.error``): never a 0.
    Failures are never cached.  Nothing here raises for a single failed sample.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import email.utils
import json
import math
import os
import random
import sqlite3
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus, urlsplit

from loguru import logger

from .base import (
    Judge,
    JudgeConfigError,
    JudgeItem,
    JudgeOutcome,
    LLMJudge,
    OfflineJudge,
    ReplyParseError,
    Verdict,
    strip_think,
)
from .cache import (
    VerdictCache,
    cached_verdict_problem,
    default_cache_path,
    sanitise_endpoint,
    verdict_key,
)

# ---- configuration variables (documented in docs/judges.md) ------------------------------------
ENV_API_KEY = "OPENAI_API_KEY"
ENV_BASE_URL = "OPENAI_BASE_URL"
ENV_API_URL = "OPENAI_API_URL"  # lmms-eval's own variable; accepted as an alias
ENV_API_BASE = "OPENAI_API_BASE"  # lmms-eval's model classes' variable: never the judge's (see resolve_endpoint)
ENV_MODEL = "LMMS_EVAL_PLUGINS_JUDGE_MODEL"
ENV_JUDGE = "LMMS_EVAL_PLUGINS_JUDGE"
ENV_CONCURRENCY = "LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY"
ENV_TIMEOUT = "LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT"
ENV_MAX_ATTEMPTS = "LMMS_EVAL_PLUGINS_JUDGE_MAX_ATTEMPTS"
ENV_RETRY_BASE = "LMMS_EVAL_PLUGINS_JUDGE_RETRY_BASE"
ENV_RETRY_MAX = "LMMS_EVAL_PLUGINS_JUDGE_RETRY_MAX"
ENV_REPORT = "LMMS_EVAL_PLUGINS_JUDGE_REPORT"
ENV_MAX_ERROR_RATE = "LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE"
ENV_SAMPLING = "LMMS_EVAL_PLUGINS_JUDGE_SAMPLING"
ENV_DEADLINE = "LMMS_EVAL_PLUGINS_JUDGE_DEADLINE"
ENV_MAX_REPLY_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES"
# More tokens than any one chat completion reports: a larger (or negative) usage count is not believed.
MAX_USAGE_TOKENS = 100_000_000
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MAX_ERROR_RATE = 0.05

RETRY_STATUS = {408, 409, 429}  # plus every 5xx
FATAL_STATUS = {401, 403, 404}  # not retried, and stop the rest of the batch


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _num(env: Mapping[str, str], name: str, default: float, kind: type = float, minimum: float = 0.0) -> Any:
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        raise JudgeConfigError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
    if value < minimum:
        raise JudgeConfigError(f"{name}={raw!r} must be >= {minimum}")
    return value


# ---- endpoint ----------------------------------------------------------------------------------


def endpoint_host(url: str | None) -> str:
    """``scheme://host[:port]`` of ``url``: never credentials, path, query or fragment.

    What the judge announcement and error messages show.  A URL that does not parse gives
    ``<unparseable URL>`` (never the raw text, which may hold a key)."""
    try:
        parts = urlsplit(str(url or "").strip())
        host, port = parts.hostname, parts.port
    except ValueError:  # e.g. a non-numeric port
        return "<unparseable URL>"
    if not parts.scheme or not host:
        return "<unparseable URL>"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


@dataclass(frozen=True)
class Endpoint:
    """An OpenAI-compatible endpoint.  The key is never shown by repr/str or written anywhere."""

    base_url: str
    api_key: str = field(repr=False)
    source: str = ""  # the variable the URL came from (ENV_API_KEY: the OpenAI default), "" if given directly

    def __post_init__(self) -> None:
        reject_url_credentials(self.base_url, self.source or "the judge endpoint", self.api_key)

    def __repr__(self) -> str:  # pragma: no cover - trivial
        return f"Endpoint(base_url={sanitise_endpoint(self.base_url)!r}, api_key=***, source={self.source!r})"

    __str__ = __repr__

    @property
    def display(self) -> str:
        return sanitise_endpoint(self.base_url)

    @property
    def host(self) -> str:
        """``scheme://host[:port]`` only (see :func:`endpoint_host`)."""
        return endpoint_host(self.base_url)

    @property
    def origin(self) -> str:
        """Where the URL came from, in words, for the judge announcement."""
        if self.source == ENV_API_KEY:
            return f"default: {ENV_API_KEY} set, no {ENV_BASE_URL}"
        return f"from {self.source}" if self.source else "given directly"


def _set(env: Mapping[str, str], name: str) -> str:
    return (env.get(name) or "").strip()


# Query parameters that carry a credential (compared lower-case, with "-" read as "_").
_CREDENTIAL_PARAMS = frozenset((
    "key", "api_key", "apikey", "token", "access_token", "auth", "auth_token", "secret", "client_secret",
    "password", "pass", "sig", "signature", "code",
))


def credential_query_params(url: str, key: str | None = None) -> list[str]:
    """Names of the query parameters of ``url`` that look like credentials, or whose value is ``key``."""
    try:
        query = urlsplit(url).query
    except ValueError:
        query = url.partition("?")[2]
    found = []
    for name, value in parse_qsl(query, keep_blank_values=True):
        norm = name.strip().lower().replace("-", "_")
        if norm in _CREDENTIAL_PARAMS or norm.endswith(("_key", "_token", "_secret")) or (key and len(key) >= 4 and key in value):
            found.append(name)
    return found


def reject_url_credentials(url: str, source: str, key: str | None = None) -> None:
    """Refuse a URL that carries ``user:password@`` (the client would send it as Basic auth) or a
    credential in its query string (``?api_key=...``): the URL is shown and stored in places a key must
    never reach. The message names only the host and the parameter names."""
    try:
        parts = urlsplit(url)
        has_credentials = parts.username is not None or parts.password is not None
    except ValueError:
        has_credentials = "@" in url.split("/", 3)[2] if url.count("/") >= 2 else "@" in url
    if has_credentials:
        raise JudgeConfigError(
            f"{source} holds credentials (user:password@ before {endpoint_host(url)}); the judge never sends a URL's "
            f"credentials: put the key in {ENV_API_KEY} and give the URL without them"
        )
    params = credential_query_params(url, key)
    if params:
        raise JudgeConfigError(
            f"{source} holds a credential in its query string (parameter(s) {', '.join(sorted(set(params)))} of "
            f"{endpoint_host(url)}); the judge never sends a key in a URL: put the key in {ENV_API_KEY} and give the "
            "URL without it"
        )


def endpoint_from_env(env: Mapping[str, str] | None = None) -> Endpoint | None:
    """The configured endpoint, or None when neither a key nor a URL is set.

    ``OPENAI_BASE_URL`` (or lmms-eval's ``OPENAI_API_URL``, with a trailing ``/chat/completions``
    removed) selects the server; with only ``OPENAI_API_KEY`` set the server is api.openai.com.  A
    URL without a key (a local vLLM/SGLang server) gets the placeholder key ``EMPTY``.
    ``OPENAI_API_BASE`` is never read: :func:`resolve_endpoint` refuses it when it is the only URL set.
    """
    env = _env(env)
    key = _set(env, ENV_API_KEY)
    url, source = _set(env, ENV_BASE_URL), ENV_BASE_URL
    if not url:
        url, source = _set(env, ENV_API_URL), ENV_API_URL
        for suffix in ("/chat/completions", "/completions"):
            url = url.removesuffix(suffix)
    if not url and not key:
        return None
    if not url:
        url, source = DEFAULT_OPENAI_BASE_URL, ENV_API_KEY
    if endpoint_host(url) == "<unparseable URL>" or urlsplit(url).scheme not in ("http", "https"):
        raise JudgeConfigError(
            f"{source} is not an http:// or https:// URL with a host; give the judge server's /v1 URL, "
            "e.g. http://localhost:8000/v1"
        )
    return Endpoint(base_url=url.rstrip("/"), api_key=key or "EMPTY", source=source)


def _offline_name(judge_name: str) -> str:
    return judge_name if judge_name.endswith("_offline") else f"{judge_name}_offline"


def missing_endpoint_message(judge_name: str) -> str:
    offline = _offline_name(judge_name)
    return (
        f"The LLM judge {judge_name!r} needs an OpenAI-compatible endpoint and none is configured. "
        f"Either set {ENV_API_KEY} (OpenAI), or {ENV_BASE_URL} (or lmms-eval's {ENV_API_URL}) to the "
        f"server's /v1 URL, e.g. http://localhost:8000/v1 for vLLM or SGLang, with {ENV_API_KEY} if it "
        f"needs one; choose the judge model with {ENV_MODEL}. Or set {ENV_JUDGE}=offline to use the "
        f"deterministic offline judge {offline!r} (lower fidelity; scores are not comparable with the papers')."
    )


def api_base_only_message(judge_name: str, api_base: str) -> str:
    """Why a run with ``OPENAI_API_BASE`` but no judge URL stops (shows the host only, never the key)."""
    return (
        f"The LLM judge {judge_name!r} does not read {ENV_API_BASE} (set here, to {endpoint_host(api_base)}): "
        f"{ENV_API_BASE} is read by lmms-eval's model class (the model under test), not by the judge, and "
        f"neither {ENV_BASE_URL} nor lmms-eval's {ENV_API_URL} is set. Judging with the model under test "
        f"would be wrong, and falling back to the public OpenAI endpoint would be a surprise, so the run stops "
        f"here, before inference. Set {ENV_BASE_URL} to the judge's endpoint (it may be the same URL, e.g. "
        f"export {ENV_BASE_URL}=${ENV_API_BASE}; choose the judge model with {ENV_MODEL}), or set "
        f"{ENV_JUDGE}=offline to use the offline judge {_offline_name(judge_name)!r} (lower fidelity)."
    )


def resolve_endpoint(judge_name: str, env: Mapping[str, str] | None = None) -> Endpoint:
    """The judge's endpoint, or :class:`JudgeConfigError` (raised at task build, before inference):
    none configured, or ``OPENAI_API_BASE`` set without ``OPENAI_BASE_URL``/``OPENAI_API_URL``."""
    env = _env(env)
    api_base = _set(env, ENV_API_BASE)
    if api_base and not _set(env, ENV_BASE_URL) and not _set(env, ENV_API_URL):
        raise JudgeConfigError(api_base_only_message(judge_name, api_base))
    endpoint = endpoint_from_env(env)
    if endpoint is None:
        raise JudgeConfigError(missing_endpoint_message(judge_name))
    return endpoint


ANNOUNCE_PREFIX = "lmms-eval-plugins judge:"
_announced: set[tuple[Any, ...]] = set()
_announced_lock = threading.Lock()


def announcement(judge_name: str, version: str | None, model: str | None, endpoint: Endpoint | None) -> str:
    """The line that says where a judge's traffic goes, e.g.
    ``lmms-eval-plugins judge: semantic_match v1 -> model gpt-4o at http://127.0.0.1:8000 (from OPENAI_BASE_URL)``;
    ``... -> offline (no endpoint)`` for an offline judge.  Host only: no credentials, path or query."""
    who = f"{judge_name} v{version}" if version else judge_name
    if endpoint is None:
        return f"{ANNOUNCE_PREFIX} {who} -> offline (no endpoint)"
    return f"{ANNOUNCE_PREFIX} {who} -> model {model} at {endpoint.host} ({endpoint.origin})"


def announce_judge(judge_name: str, version: str | None, model: str | None, endpoint: Endpoint | None) -> bool:
    """Log :func:`announcement` once per process per judge, model and endpoint; True if it was logged."""
    key = (os.getpid(), judge_name, version, model, endpoint.host if endpoint else None, endpoint.source if endpoint else None)
    with _announced_lock:
        if key in _announced:
            return False
        _announced.add(key)
    logger.info(announcement(judge_name, version, model, endpoint))
    return True


# Set for the process while lmms-eval runs with --predict_only (compat entry evaluate-hook sets it from the
# flag): judge filters then make no calls and need no endpoint; `lmms-eval-plugins score` judges later.
_judging_deferred = False


def set_judging_deferred(deferred: bool) -> None:
    global _judging_deferred
    _judging_deferred = bool(deferred)


def judging_deferred(argv: Sequence[str] | None = None) -> bool:
    return _judging_deferred or "--predict_only" in (sys.argv if argv is None else argv)


def resolve_model(default_model: str | None, env: Mapping[str, str] | None = None) -> str:
    model = (_env(env).get(ENV_MODEL) or "").strip() or (default_model or "").strip()
    if not model:
        raise JudgeConfigError(f"no judge model: set {ENV_MODEL} or give default_model in the task's JudgeFilter")
    return model


def sampling_from_env(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """``LMMS_EVAL_PLUGINS_JUDGE_SAMPLING``: a JSON object merged over the judge's sampling
    parameters (null removes one), e.g. ``{"max_tokens": null, "max_completion_tokens": 4096,
    "temperature": null}`` for a reasoning model."""
    raw = (_env(env).get(ENV_SAMPLING) or "").strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise JudgeConfigError(f"{ENV_SAMPLING} is not JSON ({exc.msg}): {raw!r}") from None
    if not isinstance(value, dict):
        raise JudgeConfigError(f"{ENV_SAMPLING} must be a JSON object, got {raw!r}")
    return value


def max_error_rate_from_env(env: Mapping[str, str] | None = None) -> float:
    value = _num(_env(env), ENV_MAX_ERROR_RATE, DEFAULT_MAX_ERROR_RATE)
    if value > 1:
        raise JudgeConfigError(f"{ENV_MAX_ERROR_RATE} is a fraction in [0, 1], got {value}")
    return float(value)


# ---- settings ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeSettings:
    concurrency: int = 32  # 200 ms calls: 32 in flight gives >20x over sequential (bench/bench_judges.py)
    timeout: float = 60.0  # seconds per HTTP request
    max_attempts: int = 6  # HTTP attempts per call (1 = no retry)
    retry_base: float = 1.0  # first backoff delay, doubled per attempt, full jitter in [d/2, d]
    retry_max: float = 60.0  # cap of the backoff delay
    max_retry_after: float = 120.0  # cap of a server's Retry-After
    max_reask: int | None = None  # re-asks after an unparseable reply (None: the judge's own)
    deadline: float | None = None  # seconds for one whole HTTP exchange, however the bytes trickle (None: timeout)
    max_reply_bytes: int = 65536  # a longer reply is a judge error, never parsed or cached

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> RuntimeSettings:
        env = _env(env)
        values = {
            "concurrency": _num(env, ENV_CONCURRENCY, cls.concurrency, int, 1),
            "timeout": _num(env, ENV_TIMEOUT, cls.timeout, float, 0.001),
            "max_attempts": _num(env, ENV_MAX_ATTEMPTS, cls.max_attempts, int, 1),
            "retry_base": _num(env, ENV_RETRY_BASE, cls.retry_base),
            "retry_max": _num(env, ENV_RETRY_MAX, cls.retry_max),
            "deadline": _num(env, ENV_DEADLINE, None, float, 0.001),
            "max_reply_bytes": _num(env, ENV_MAX_REPLY_BYTES, cls.max_reply_bytes, int, 1),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def total_deadline(self) -> float:
        """Seconds one HTTP exchange may take in all (the client's timeout is per socket read)."""
        return self.timeout if self.deadline is None else self.deadline

    def backoff(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Delay before retry number ``attempt + 1`` (attempt counts from 0)."""
        ceiling = min(self.retry_max, self.retry_base * (2**attempt))
        delay = rng.uniform(ceiling / 2, ceiling) if ceiling > 0 else 0.0
        if retry_after is not None and math.isfinite(retry_after) and retry_after > 0:
            delay = max(delay, min(retry_after, self.max_retry_after))
        return delay


def parse_retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), or None."""
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return float(ms) / 1000.0
    except (TypeError, ValueError):
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, IndexError, OverflowError):
        return None


# ---- accounting --------------------------------------------------------------------------------


@dataclass
class Stats:
    verdicts: int = 0  # samples with a verdict (from a call, the cache, or offline)
    calls: int = 0  # HTTP requests sent (retries and re-asks included)
    failed_calls: int = 0  # HTTP requests that did not return a usable body
    retries: int = 0
    reasks: int = 0
    cache_hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    judge_errors: int = 0
    skipped: int = 0  # nothing to judge (item_fn returned None)
    empty_predictions: int = 0  # empty answers scored 0 without a call
    offline_verdicts: int = 0
    usage_ignored: int = 0  # replies whose token counts were negative or absurd (counted as 0)

    def add(self, other: Stats) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class Accounting:
    """Thread-safe counters per judge model and per judge."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.by_model: dict[str, Stats] = {}
        self.by_judge: dict[str, Stats] = {}
        self.failures: dict[str, dict[str, int]] = {}  # judge model -> failed calls by reason
        self.endpoints: set[str] = set()

    def bump(self, judge: Judge, model: str | None, **counts: int) -> None:
        mkey = model if model else f"offline:{judge.name}"
        jkey = f"{judge.name}@{judge.version}"
        with self._lock:
            for table, key in ((self.by_model, mkey), (self.by_judge, jkey)):
                stats = table.setdefault(key, Stats())
                for name, value in counts.items():
                    setattr(stats, name, getattr(stats, name) + value)

    def failed(self, judge: Judge, model: str | None, reason: str) -> None:
        """One failed call (``failed_calls``), counted by reason too ("HTTP 500", "timeout", ...)."""
        self.bump(judge, model, failed_calls=1)
        with self._lock:
            by_reason = self.failures.setdefault(model if model else f"offline:{judge.name}", {})
            by_reason[reason] = by_reason.get(reason, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            total = Stats()
            for stats in self.by_model.values():
                total.add(stats)
            return {
                "by_model": {k: asdict(v) for k, v in sorted(self.by_model.items())},
                "by_judge": {k: asdict(v) for k, v in sorted(self.by_judge.items())},
                "failures_by_reason": {k: dict(sorted(v.items())) for k, v in sorted(self.failures.items())},
                "totals": asdict(total),
                "endpoints": sorted(self.endpoints),
            }

    @property
    def active(self) -> bool:
        return bool(self.by_model)


# ---- redaction ---------------------------------------------------------------------------------


def _base64_cores(secret: bytes) -> list[str]:
    """The base64 text that ``secret`` becomes wherever it sits in an encoded byte string: for each of
    the three alignments, the characters that depend on the secret's bytes alone (standard alphabet)."""
    cores = []
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + secret).decode("ascii")
        first = (shift * 8 + 5) // 6  # characters that still hold bits of the bytes before the secret
        last = (shift + len(secret)) * 8 // 6  # characters made of whole secret bits
        cores.append(encoded[first:last])
    return cores


def encoded_forms(secret: str) -> set[str]:
    """``secret`` as it may be echoed back: raw, URL-encoded (``%XX`` and ``+`` for space, either
    hex case), and base64 at any alignment, standard or URL-safe, padded or not (the padding is not
    part of what is matched)."""
    forms = {secret, quote(secret, safe=""), quote_plus(secret, safe=""), quote(secret, safe="").lower()}
    forms |= {quote(secret, safe="/:"), quote_plus(secret)}
    for core in _base64_cores(secret.encode("utf-8")):
        forms |= {core, core.translate(str.maketrans("+/", "-_"))}
    return {f for f in forms if len(f) >= 4}


class Redactor:
    """Replaces every secret it has seen (API keys), in the encoded forms of :func:`encoded_forms`,
    with ``***`` in text leaving the runtime."""

    def __init__(self) -> None:
        self._secrets: set[str] = set()
        self._forms: list[str] = []  # longest first: a form inside another is replaced after it

    def add(self, secret: str | None) -> None:
        if secret and secret != "EMPTY" and len(secret) >= 4 and secret not in self._secrets:
            self._secrets.add(secret)
            self._forms = sorted(set(self._forms) | encoded_forms(secret), key=len, reverse=True)

    def __call__(self, text: Any) -> Any:
        if not isinstance(text, str):
            return text
        for form in self._forms:
            if form in text:
                text = text.replace(form, "***")
        return text


# ---- runtime -----------------------------------------------------------------------------------


class _CallFailed(Exception):
    def __init__(self, reason: str, *, fatal: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fatal = fatal


@dataclass
class _Job:
    index: int
    item: JudgeItem
    messages: list[dict[str, str]]
    key: str


def lmms_eval_output_path(argv: Sequence[str] | None = None) -> str | None:
    """The ``--output_path`` folder of the lmms-eval command this process runs, if any."""
    args = list(sys.argv if argv is None else argv)
    for i, arg in enumerate(args):
        if arg == "--output_path" and i + 1 < len(args):
            return args[i + 1].rstrip("/") + "/"
        if arg.startswith("--output_path="):
            return arg.split("=", 1)[1].rstrip("/") + "/"
    return None


class JudgeRuntime:
    """Judges batches of items: cache first, then concurrent calls with retries.  Thread-safe."""

    def __init__(self, cache_path: str | os.PathLike[str] | None = None, *, seed: int | None = None) -> None:
        self.cache = VerdictCache(cache_path if cache_path is not None else default_cache_path())
        self.accounting = Accounting()
        self.redact = Redactor()
        self._rng = random.Random(seed)
        self._rng_lock = threading.Lock()
        self._report_requests: set[str | None] = set()  # report_path arguments used so far
        self._usage_noted = False

    @property
    def cache_path(self) -> Path:
        return self.cache.path

    # -- public API ---------------------------------------------------------------------------
    def judge_items(
        self,
        judge: Judge,
        items: Sequence[JudgeItem | None],
        *,
        model: str | None = None,
        endpoint: Endpoint | None = None,
        settings: RuntimeSettings | None = None,
    ) -> list[JudgeOutcome]:
        """One outcome per item, in order.  ``None`` items are skipped (nothing to judge).

        Never raises for a sample that cannot be judged: that sample's outcome carries ``error``.
        """
        outcomes: list[JudgeOutcome | None] = [None] * len(items)
        model_name = None if judge.offline else model
        pending: list[_Job] = []

        def done(i: int, **kw: Any) -> None:
            outcomes[i] = JudgeOutcome(name=judge.name, version=judge.version, model=model_name, **kw)

        for i, item in enumerate(items):
            if item is None:
                done(i, skipped=True, detail={"skipped": "nothing to judge"})
                self.accounting.bump(judge, model_name, skipped=1)
                continue
            try:
                judge.validate_item(item)
            except (ValueError, TypeError) as exc:
                done(i, error=f"invalid judge item: {exc}")
                self.accounting.bump(judge, model_name, judge_errors=1)
                continue
            if not strip_think(item.prediction):
                v = judge.empty_verdict(item)
                done(i, verdict=v.score, detail=v.detail)
                self.accounting.bump(judge, model_name, verdicts=1, empty_predictions=1)
                continue
            if isinstance(judge, OfflineJudge):
                try:
                    v = judge.judge(item)
                except Exception as exc:  # a bug in a judge must not sink the run
                    done(i, error=f"offline judge failed: {exc!r}")
                    self.accounting.bump(judge, model_name, judge_errors=1)
                    continue
                done(i, verdict=v.score, detail=v.detail)
                self.accounting.bump(judge, model_name, verdicts=1, offline_verdicts=1)
                continue
            if not isinstance(judge, LLMJudge):
                raise JudgeConfigError(f"judge {judge.name!r} is neither an LLMJudge nor an OfflineJudge")
            if endpoint is None or not model:
                raise JudgeConfigError(missing_endpoint_message(judge.name) if endpoint is None else "no judge model given")
            try:
                messages = judge.build_messages(item)
                key = verdict_key(
                    judge=judge.name, version=judge.version, model=model, endpoint=endpoint.base_url,
                    messages=messages, sampling=judge.sampling,
                )
            except Exception as exc:  # a bug in a judge's prompt building: this sample only
                done(i, error=f"could not build the judge request: {exc!r}")
                self.accounting.bump(judge, model_name, judge_errors=1)
                continue
            pending.append(_Job(i, item, messages, key))

        if pending:
            assert endpoint is not None and model is not None
            self.redact.add(endpoint.api_key)
            self.accounting.endpoints.add(endpoint.display)
            rejected: dict[str, str] = {}  # cache rows that failed validation: key -> why
            try:
                cached = self.cache.get_many((job.key for job in pending), rejected=rejected)
            except (sqlite3.Error, OSError) as exc:  # judge without the cache rather than lose the run
                logger.error(f"judge cache {self.cache_path} unreadable ({exc}); judging without it")
                cached = {}
            to_call: list[_Job] = []
            duplicates: list[tuple[_Job, _Job]] = []  # identical requests in one batch: asked once
            first_of: dict[str, _Job] = {}
            for job in pending:
                row = cached.get(job.key)
                if row is not None:  # never trusted: a row that is not this judge's verdict is judged again
                    problem = cached_verdict_problem(judge, job.item, row, model=model, endpoint=endpoint.base_url)
                    if problem is not None:
                        rejected[job.key], row = problem, None
                if row is None:
                    if job.key in first_of:
                        duplicates.append((job, first_of[job.key]))
                    else:
                        first_of[job.key] = job
                        to_call.append(job)
                    continue
                outcomes[job.index] = JudgeOutcome(
                    name=judge.name, version=judge.version, model=model, verdict=row["score"], detail=row["detail"], cached=True
                )
                self.accounting.bump(judge, model, verdicts=1, cache_hits=1)
            if rejected:
                logger.warning(self.redact(
                    f"judge cache {self.cache_path}: ignored {len(rejected)} invalid cached verdict(s) of "
                    f"{judge.name}@{judge.version}; judging them again (e.g. {next(iter(rejected.values()))})"
                ))
            if to_call:
                settings = settings or RuntimeSettings.from_env()
                logger.info(
                    f"judge {judge.name}@{judge.version} ({model} at {endpoint.display}): {len(to_call)} to call, "
                    f"{len(pending) - len(to_call) - len(duplicates)} from the cache {self.cache_path}, "
                    f"concurrency {settings.concurrency}"
                )
                try:
                    results = _run_sync(lambda: self._call_all(judge, to_call, model, endpoint, settings))
                except Exception as exc:  # the runtime itself failed: every pending sample is a judge error
                    reason = self.redact(f"judge runtime failed: {exc!r}")
                    logger.error(reason)
                    results = [JudgeOutcome(judge.name, judge.version, model, error=reason) for _ in to_call]
                    self.accounting.bump(judge, model, judge_errors=len(to_call))
                for job, outcome in zip(to_call, results):
                    outcomes[job.index] = outcome
            for job, original in duplicates:
                source = outcomes[original.index]
                assert source is not None
                outcomes[job.index] = JudgeOutcome(
                    judge.name, judge.version, model, verdict=source.verdict, detail=dict(source.detail),
                    error=source.error, cached=source.ok,
                )
                if source.ok:
                    self.accounting.bump(judge, model, verdicts=1, cache_hits=1)
                else:
                    self.accounting.bump(judge, model, judge_errors=1)
        final = [o for o in outcomes]
        assert all(o is not None for o in final)
        n_err = sum(1 for o in final if o is not None and o.error)
        if n_err:
            logger.warning(f"judge {judge.name}: {n_err} of {len(final)} samples are judge errors (excluded from the metric, counted)")
        return final  # type: ignore[return-value]

    def report(self) -> dict[str, Any]:
        snap = self.accounting.snapshot()
        return {
            "cache_path": str(self.cache_path),
            **snap,
            "pid": os.getpid(),
            "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }

    def report_path(self, explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
        """Where the accounting JSON goes: ``explicit``, else ``$LMMS_EVAL_PLUGINS_JUDGE_REPORT``, else the
        ``--output_path`` of the running lmms-eval command (next to its results), else ``judge_report.json``
        next to the cache.  A directory gets ``judge_report.json`` inside it.
        Ranks > 0 of a multi-process run write ``judge_report.rank<R>.json``."""
        env = _env(env)
        raw = explicit or env.get(ENV_REPORT) or lmms_eval_output_path() or ""
        path = Path(raw).expanduser() if raw else self.cache_path.parent / "judge_report.json"
        if (raw and (str(raw).endswith(("/", os.sep)))) or path.is_dir():
            path = path / "judge_report.json"
        rank = int(env.get("RANK", "0") or 0)
        if rank > 0:
            path = path.with_name(f"{path.stem}.rank{rank}{path.suffix or '.json'}")
        return path

    def write_report(self, path: str | os.PathLike[str] | None = None) -> Path:
        target = self.report_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = self.redact(json.dumps(self.report(), indent=2, sort_keys=True))
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        tmp.write_text(text + "\n", encoding="utf-8")
        os.replace(tmp, target)
        self._report_requests.add(None if path is None else str(path))
        return target

    def summary(self) -> str:
        snap = self.accounting.snapshot()
        lines = [f"judge accounting (cache {self.cache_path}):"]
        for model, s in snap["by_model"].items():
            lines.append(
                f"  {model}: verdicts {s['verdicts']}, calls {s['calls']} (retries {s['retries']}, re-asks {s['reasks']}, "
                f"failed {s['failed_calls']}), cache hits {s['cache_hits']}, tokens in {s['tokens_in']} / out {s['tokens_out']}, "
                f"judge errors {s['judge_errors']}"
            )
        return "\n".join(lines)

    # -- internals ----------------------------------------------------------------------------
    def _note_usage(self, note: str) -> None:
        """Warn once per runtime about a reply's unbelievable token counts (they count as 0)."""
        if not self._usage_noted:
            self._usage_noted = True
            logger.warning(f"judge reply usage ignored: {note}; such counts are taken as 0 (counted in usage_ignored)")

    def _jitter_delay(self, settings: RuntimeSettings, attempt: int, retry_after: float | None) -> float:
        with self._rng_lock:
            return settings.backoff(attempt, retry_after, self._rng)

    async def _call_all(
        self, judge: LLMJudge, jobs: list[_Job], model: str, endpoint: Endpoint, settings: RuntimeSettings
    ) -> list[JudgeOutcome]:
        import openai

        client = openai.AsyncOpenAI(
            api_key=endpoint.api_key, base_url=endpoint.base_url, max_retries=0, timeout=settings.timeout
        )
        semaphore = asyncio.Semaphore(settings.concurrency)
        fatal: dict[str, str] = {}

        async def run(job: _Job) -> JudgeOutcome:
            async with semaphore:
                try:
                    return await self._judge_job(client, judge, job, model, endpoint, settings, fatal)
                except Exception as exc:  # defensive: an unexpected bug becomes a judge error, not a crash
                    self.accounting.bump(judge, model, judge_errors=1)
                    return JudgeOutcome(judge.name, judge.version, model, error=self.redact(f"internal error: {exc!r}"))

        try:
            return list(await asyncio.gather(*(run(job) for job in jobs)))
        finally:
            await client.close()

    async def _judge_job(
        self, client: Any, judge: LLMJudge, job: _Job, model: str, endpoint: Endpoint,
        settings: RuntimeSettings, fatal: dict[str, str],
    ) -> JudgeOutcome:
        max_reask = judge.max_reask if settings.max_reask is None else settings.max_reask
        messages = list(job.messages)
        tokens_in = tokens_out = 0
        last_problem = ""
        for round_ in range(max_reask + 1):
            try:
                reply, tin, tout = await self._call(client, judge, messages, model, settings, fatal)
            except _CallFailed as exc:
                self.accounting.bump(judge, model, judge_errors=1)
                return JudgeOutcome(judge.name, judge.version, model, error=self.redact(exc.reason))
            tokens_in += tin
            tokens_out += tout
            try:
                # parsed as redacted (encoded forms too), so an error quoting a cut-off reply holds no key part
                verdict: Verdict = judge.parse_reply(self.redact(reply), job.item)
            except ReplyParseError as exc:
                last_problem = str(exc)
                if round_ < max_reask:
                    self.accounting.bump(judge, model, reasks=1)
                    messages = messages + [
                        {"role": "assistant", "content": reply},
                        {"role": "user", "content": judge.reask_message(job.item, last_problem)},
                    ]
                continue
            detail = {k: self.redact(v) for k, v in verdict.detail.items()}
            if round_:
                detail["reasks"] = round_
            try:
                self.cache.put(
                    job.key, judge=judge.name, version=judge.version, model=model, endpoint=endpoint.base_url,
                    score=verdict.score, detail=detail, reply=self.redact(reply), tokens_in=tokens_in, tokens_out=tokens_out,
                )
            except (sqlite3.Error, OSError) as exc:  # the verdict stands; only its caching failed
                logger.warning(f"judge cache {self.cache_path}: could not store a verdict ({exc})")
            self.accounting.bump(judge, model, verdicts=1)
            return JudgeOutcome(judge.name, judge.version, model, verdict=verdict.score, detail=detail)
        self.accounting.bump(judge, model, judge_errors=1)
        reason = f"unparseable judge reply after {max_reask} re-ask(s): {last_problem}"
        return JudgeOutcome(judge.name, judge.version, model, error=self.redact(reason))

    async def _call(
        self, client: Any, judge: LLMJudge, messages: list[dict[str, str]], model: str,
        settings: RuntimeSettings, fatal: dict[str, str],
    ) -> tuple[str, int, int]:
        """One chat completion with our retry policy: (reply text, tokens in, tokens out)."""
        import openai

        last = ""
        for attempt in range(settings.max_attempts):
            if "reason" in fatal:
                raise _CallFailed(f"not attempted: an earlier call failed for good ({fatal['reason']})", fatal=True)
            retry_after: float | None = None
            self.accounting.bump(judge, model, calls=1)
            deadline = settings.total_deadline
            try:
                # the client's timeout is per socket read: a judge trickling bytes would never trip it
                response = await asyncio.wait_for(
                    client.chat.completions.create(model=model, messages=messages, **judge.sampling), timeout=deadline
                )
                reply, tin, tout, usage_note = _read_completion(response)
                if usage_note:
                    self.accounting.bump(judge, model, usage_ignored=1)
                    self._note_usage(usage_note)
                self.accounting.bump(judge, model, tokens_in=tin, tokens_out=tout)
                size = len(reply.encode("utf-8", "replace"))
                if size > settings.max_reply_bytes:
                    self.accounting.failed(judge, model, "reply too large")
                    raise _CallFailed(
                        f"the judge reply is {size} bytes, over {ENV_MAX_REPLY_BYTES}={settings.max_reply_bytes} "
                        "(not retried, not cached)"
                    )
                return reply, tin, tout
            except asyncio.TimeoutError:
                last = kind = f"no complete reply within the {deadline:g} s deadline"
            except openai.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {_short(exc.message)}"
                retryable = status in RETRY_STATUS or status >= 500
                if not retryable:
                    self.accounting.failed(judge, model, f"HTTP {status}")
                    if status in FATAL_STATUS and "reason" not in fatal:
                        fatal["reason"] = self.redact(last)
                        logger.error(f"judge endpoint refused the request ({self.redact(last)}); the remaining calls of this batch are not attempted")
                    raise _CallFailed(self.redact(f"{last} (not retried)"), fatal=status in FATAL_STATUS) from None
                retry_after = parse_retry_after(exc.response.headers if exc.response is not None else None)
                kind = f"HTTP {status}"
            except openai.APITimeoutError:
                last = kind = f"timeout after {settings.timeout:g} s"
            except openai.APIConnectionError as exc:
                last, kind = f"connection error: {_short(str(exc.__cause__ or exc))}", "connection error"
            except _MalformedResponse as exc:
                last, kind = f"malformed response: {exc}", "malformed response"
            except (openai.APIResponseValidationError, ValueError) as exc:
                last, kind = f"malformed response: {_short(str(exc))}", "malformed response"
            except openai.APIError as exc:  # anything else the client raises: treat as transient
                last, kind = f"{type(exc).__name__}: {_short(str(exc))}", type(exc).__name__
            self.accounting.failed(judge, model, kind)
            if attempt + 1 < settings.max_attempts:
                self.accounting.bump(judge, model, retries=1)
                await asyncio.sleep(self._jitter_delay(settings, attempt, retry_after))
        raise _CallFailed(self.redact(f"gave up after {settings.max_attempts} attempts; last: {last}"))


class _MalformedResponse(Exception):
    pass


def _short(text: Any, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def usage_count(value: Any) -> int | None:
    """A token count from a reply's ``usage``: a whole number in [0, MAX_USAGE_TOKENS]; None for
    anything else (negative, absurd, fractional, not a number), which the caller counts as 0."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        count = value
    elif isinstance(value, float) and value.is_integer():
        count = int(value)
    else:
        return None
    return count if 0 <= count <= MAX_USAGE_TOKENS else None


def _read_completion(response: Any) -> tuple[str, int, int, str]:
    """(reply text, tokens in, tokens out, a note naming unbelievable usage counts or "")."""
    if isinstance(response, (str, bytes)):
        raise _MalformedResponse(f"body is not a chat completion: {_short(response, 80)!r}")
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError, TypeError):
        raise _MalformedResponse("no choices[0].message.content in the body") from None
    if not isinstance(content, str):
        raise _MalformedResponse("choices[0].message.content is not text")
    usage = getattr(response, "usage", None)
    counts, bad = [], []
    for name in ("prompt_tokens", "completion_tokens"):
        raw = getattr(usage, name, None) if usage is not None else None
        count = 0 if raw is None else usage_count(raw)
        if count is None:
            bad.append(f"{name}={_short(repr(raw), 40)}")
        counts.append(count or 0)
    return content, counts[0], counts[1], ", ".join(bad)


def _run_sync(factory: Any) -> Any:
    """Run the coroutine made by ``factory`` to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    # called from inside a running event loop (a notebook): use a private loop in a worker thread
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()


# ---- the process-wide runtime ------------------------------------------------------------------

_runtimes: dict[Path, JudgeRuntime] = {}
_runtimes_lock = threading.Lock()
_runtimes_pid = os.getpid()


def accounting_reports() -> list[dict[str, Any]]:
    """This process's judge accounting (one entry per verdict cache that was used), redacted, for the
    results JSON of the run (compat entry results-hook writes it there)."""
    with _runtimes_lock:
        runtimes = list(_runtimes.values())
    reports = []
    for runtime in runtimes:
        report = runtime.report()
        if report.get("by_judge"):
            reports.append(json.loads(runtime.redact(json.dumps(report, sort_keys=True))))
    return reports


def get_runtime(cache_path: str | os.PathLike[str] | None = None) -> JudgeRuntime:
    """The process-wide runtime for a cache (default: ``$LMMS_EVAL_PLUGINS_JUDGE_CACHE`` or
    ``~/.cache/lmms_eval_plugins/judge_cache.sqlite3``)."""
    global _runtimes_pid
    path = Path(cache_path).expanduser() if cache_path is not None else default_cache_path()
    path = path.resolve() if path.parent.exists() else path.absolute()
    with _runtimes_lock:
        if _runtimes_pid != os.getpid():  # forked: start fresh (connections do not survive a fork)
            _runtimes.clear()
            _runtimes_pid = os.getpid()
        runtime = _runtimes.get(path)
        if runtime is None:
            runtime = _runtimes[path] = JudgeRuntime(path)
        return runtime


def reset_runtimes() -> None:
    """Forget all runtimes and judge announcements (tests)."""
    with _runtimes_lock:
        for runtime in _runtimes.values():
            runtime.cache.close()
        _runtimes.clear()
    with _announced_lock:
        _announced.clear()


@atexit.register
def _final_summary() -> None:  # pragma: no cover - exercised in real runs
    for runtime in list(_runtimes.values()):
        if runtime.accounting.active:
            try:
                logger.info(runtime.summary())
                for requested in sorted(runtime._report_requests, key=str):
                    path = runtime.write_report(requested)
                    logger.info(f"judge accounting written to {path}")
            except Exception:
                pass
