"""The judge runtime: cached and concurrent calls, retries, deadlines, and their settings.

One :class:`JudgeRuntime` per verdict cache and run (:mod:`.session` owns them); it outlives the task
``utils.py`` modules, which lmms-eval re-executes per task.  Calls go through the ``openai`` client (``AsyncOpenAI``, its
own retries switched off) to any OpenAI-compatible endpoint; retries, backoff and the decision of
what to retry are ours, so they are tested.  Where the calls go is :mod:`.endpoint`, what they
cost is :mod:`.accounting`, and :mod:`.redaction` keeps the key out of every text they produce.

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
import concurrent.futures
import email.utils
import json
import math
import os
import random
import sqlite3
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loguru import logger

from lmms_eval_plugins.bounded_http import BodyTooLarge, DeadlinePassed, RedirectRefused, openai_client
from lmms_eval_plugins.safe_files import write_atomic
from lmms_eval_plugins.settings import BadSetting, env_number

from . import batch_requests
from .accounting import (
    Accounting,
    accounting_report,
    accounting_report_path,
    accounting_summary,
    connection_cause,
    judge_error_causes,
)
from .base import (
    Judge,
    JudgeConfigError,
    JudgeItem,
    JudgeOutcome,
    LLMJudge,
    OfflineJudge,
    ReplyParseError,
    Verdict,
)
from .cache import (
    VerdictCache,
    cached_verdict_problem,
    default_cache_path,
    verdict_key,
)
from .endpoint import Endpoint, missing_endpoint_message
from .redaction import Redactor
from .reply import MalformedResponse, cached_tokens, read_completion, shorten

# ---- configuration variables (documented in docs/judges.md) ------------------------------------
ENV_CONCURRENCY = "LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY"
ENV_TIMEOUT = "LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT"
ENV_MAX_ATTEMPTS = "LMMS_EVAL_PLUGINS_JUDGE_MAX_ATTEMPTS"
ENV_RETRY_BASE = "LMMS_EVAL_PLUGINS_JUDGE_RETRY_BASE"
ENV_RETRY_MAX = "LMMS_EVAL_PLUGINS_JUDGE_RETRY_MAX"
ENV_MAX_ERROR_RATE = "LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE"
ENV_SAMPLING = "LMMS_EVAL_PLUGINS_JUDGE_SAMPLING"
ENV_DEADLINE = "LMMS_EVAL_PLUGINS_JUDGE_DEADLINE"
ENV_MAX_REPLY_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES"
DEFAULT_MAX_ERROR_RATE = 0.05
# The HTTP body around a reply: JSON escaping can grow its text (\uXXXX), plus the completion's envelope.
REPLY_BODY_FACTOR = 4
REPLY_ENVELOPE_BYTES = 64 * 1024

RETRY_STATUS = {408, 409, 429}  # plus every 5xx
FATAL_STATUS = {401, 403, 404}  # not retried, and stop the rest of the batch


def _env(env: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if env is None else env


def _num(env: Mapping[str, str], name: str, default: float | None, kind: type = float, minimum: float = 0.0) -> Any:
    """``name``'s number by the one rule of :func:`env_number` (finite: no nan, no inf), else ``default``."""
    if not (env.get(name) or "").strip():
        return default
    whole = kind is int
    try:
        return kind(env_number(name, 0, whole=whole, minimum=minimum, env=env))
    except BadSetting as exc:
        raise JudgeConfigError(
            f"{exc}: set it to a {'whole ' if whole else ''}number of at least {minimum:g}, or unset it"
        ) from None


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
    def max_body_bytes(self) -> int:
        """The cap on one reply's HTTP body, which is read no further: the reply cap with room for its JSON."""
        return REPLY_BODY_FACTOR * self.max_reply_bytes + REPLY_ENVELOPE_BYTES

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


# ---- runtime -----------------------------------------------------------------------------------


class _CallFailed(Exception):
    def __init__(self, reason: str, *, fatal: bool = False, cause: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.cause = cause or reason  # short, for the counts by cause ("HTTP 401", "connection refused")
        self.fatal = fatal


@dataclass
class _Job:
    index: int
    item: JudgeItem
    messages: list[dict[str, str]]
    key: str


class JudgeRuntime:
    """Judges batches of items: cache first, then concurrent calls with retries.  Thread-safe."""

    def __init__(
        self,
        cache_path: str | os.PathLike[str] | None = None,
        *,
        seed: int | None = None,
        output_path: str | None = None,
    ) -> None:
        self.cache = VerdictCache(cache_path if cache_path is not None else default_cache_path())
        self.output_path = output_path  # the run's --output_path (its session's): where its report goes
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
        causes: dict[int, str] = {}  # item index -> why a called item has no verdict (its duplicates share it)

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
            if judge.nothing_to_judge(item):
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
                raise JudgeConfigError(
                    missing_endpoint_message(judge.name) if endpoint is None else "no judge model given"
                )
            try:
                messages = judge.build_messages(item)
                key = verdict_key(
                    judge=judge.name,
                    version=judge.version,
                    model=model,
                    endpoint=endpoint.base_url,
                    messages=messages,
                    sampling=judge.sampling,
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
                    name=judge.name,
                    version=judge.version,
                    model=model,
                    verdict=row["score"],
                    detail=row["detail"],
                    cached=True,
                )
                self.accounting.bump(judge, model, verdicts=1, cache_hits=1)
            if rejected:
                logger.warning(
                    self.redact(
                        f"judge cache {self.cache_path}: ignored {len(rejected)} invalid cached verdict(s) of "
                        f"{judge.name}@{judge.version}; judging them again (e.g. {next(iter(rejected.values()))})"
                    )
                )
            deferred = batch_requests.mode() if to_call else None
            if deferred is not None:  # inside `score --batch`: collect the requests, or call nothing
                if deferred[0] == "collect":
                    batch_requests.collect(
                        deferred[1],
                        (
                            batch_requests.BatchRequest(
                                job.key,
                                judge.name,
                                judge.version,
                                model,
                                endpoint.base_url,
                                dict(judge.sampling),
                                job.messages,
                                batch_requests.item_fields(job.item),
                            )
                            for job in to_call
                        ),
                    )
                why = batch_requests.COLLECTED if deferred[0] == "collect" else deferred[1]
                for job in to_call:
                    outcomes[job.index] = JudgeOutcome(judge.name, judge.version, model, error=why)
                    causes[job.index] = "no batch verdict"
                    if deferred[0] != "collect":
                        self.accounting.judge_error(judge, model, endpoint.host, "no batch verdict")
                to_call = []
            if to_call:
                settings = settings or RuntimeSettings.from_env()
                logger.info(
                    f"judge {judge.name}@{judge.version} ({model} at {endpoint.display}): {len(to_call)} to call, "
                    f"{len(pending) - len(to_call) - len(duplicates)} from the cache {self.cache_path}, "
                    f"concurrency {settings.concurrency}"
                )
                try:
                    results = _run_sync(lambda: self._call_all(judge, to_call, model, endpoint, settings, causes))
                except Exception as exc:  # the runtime itself failed: every pending sample is a judge error
                    reason = self.redact(f"judge runtime failed: {exc!r}")
                    logger.error(reason)
                    results = [JudgeOutcome(judge.name, judge.version, model, error=reason) for _ in to_call]
                    for job in to_call:
                        causes[job.index] = "internal error"
                        self.accounting.judge_error(judge, model, endpoint.host, "internal error")
                for job, outcome in zip(to_call, results):
                    outcomes[job.index] = outcome
            for job, original in duplicates:
                source = outcomes[original.index]
                assert source is not None
                outcomes[job.index] = JudgeOutcome(
                    judge.name,
                    judge.version,
                    model,
                    verdict=source.verdict,
                    detail=dict(source.detail),
                    error=source.error,
                    cached=source.ok,
                )
                if source.ok:
                    self.accounting.bump(judge, model, verdicts=1, cache_hits=1)
                else:
                    causes[job.index] = causes.get(original.index, "internal error")
                    self.accounting.judge_error(judge, model, endpoint.host, causes[job.index])
        final = [o for o in outcomes]
        assert all(o is not None for o in final)
        n_err = sum(1 for o in final if o is not None and o.error)
        if n_err:
            named = f": {judge_error_causes(causes, endpoint.host)}" if causes and endpoint else ""
            logger.warning(
                f"judge {judge.name}: {n_err} of {len(final)} samples are judge errors "
                f"(excluded from the metric, counted){named}"
            )
        return final  # type: ignore[return-value]

    def report(self) -> dict[str, Any]:
        return accounting_report(self.accounting, self.cache_path)

    def report_path(self, explicit: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> Path:
        """Where the accounting JSON goes (see :func:`accounting_report_path`)."""
        return accounting_report_path(self.cache_path, explicit, env, self.output_path)

    def write_report(self, path: str | os.PathLike[str] | None = None) -> Path:
        target = self.report_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        text = self.redact(json.dumps(self.report(), indent=2, sort_keys=True))
        write_atomic(target, text + "\n")  # never through a link planted at the report or a temp name
        self._report_requests.add(None if path is None else str(path))
        return target

    def report_requests(self) -> set[str | None]:
        """The report paths asked for so far (None: the default one)."""
        return set(self._report_requests)

    def summary(self) -> str:
        return accounting_summary(self.accounting, self.cache_path)

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
        self,
        judge: LLMJudge,
        jobs: list[_Job],
        model: str,
        endpoint: Endpoint,
        settings: RuntimeSettings,
        causes: dict[int, str],
    ) -> list[JudgeOutcome]:
        # bounded: no body read past its cap, no exchange past its deadline, no redirect followed
        client = openai_client(
            endpoint.base_url,
            endpoint.api_key,
            timeout=settings.timeout,
            deadline=settings.total_deadline,
            max_bytes=settings.max_body_bytes,
            max_retries=0,
            asynchronous=True,
        )
        semaphore = asyncio.Semaphore(settings.concurrency)
        fatal: dict[str, str] = {}

        async def run(job: _Job) -> JudgeOutcome:
            async with semaphore:
                try:
                    return await self._judge_job(client, judge, job, model, endpoint, settings, fatal, causes)
                except Exception as exc:  # defensive: an unexpected bug becomes a judge error, not a crash
                    causes[job.index] = "internal error"
                    self.accounting.judge_error(judge, model, endpoint.host, "internal error")
                    return JudgeOutcome(judge.name, judge.version, model, error=self.redact(f"internal error: {exc!r}"))

        try:
            return list(await asyncio.gather(*(run(job) for job in jobs)))
        finally:
            await client.close()

    async def _judge_job(
        self,
        client: Any,
        judge: LLMJudge,
        job: _Job,
        model: str,
        endpoint: Endpoint,
        settings: RuntimeSettings,
        fatal: dict[str, str],
        causes: dict[int, str],
    ) -> JudgeOutcome:
        max_reask = judge.max_reask if settings.max_reask is None else settings.max_reask
        messages = list(job.messages)
        tokens_in = tokens_out = 0
        last_problem = ""
        for round_ in range(max_reask + 1):
            try:
                reply, tin, tout = await self._call(client, judge, messages, model, settings, fatal)
            except _CallFailed as exc:
                causes[job.index] = exc.cause
                self.accounting.judge_error(judge, model, endpoint.host, exc.cause)
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
                    job.key,
                    judge=judge.name,
                    version=judge.version,
                    model=model,
                    endpoint=endpoint.base_url,
                    score=verdict.score,
                    detail=detail,
                    reply=self.redact(reply),
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                )
            except (sqlite3.Error, OSError) as exc:  # the verdict stands; only its caching failed
                logger.warning(f"judge cache {self.cache_path}: could not store a verdict ({exc})")
            self.accounting.bump(judge, model, verdicts=1)
            return JudgeOutcome(judge.name, judge.version, model, verdict=verdict.score, detail=detail)
        causes[job.index] = "unparseable reply"
        self.accounting.judge_error(judge, model, endpoint.host, "unparseable reply")
        reason = f"unparseable judge reply after {max_reask} re-ask(s): {last_problem}"
        return JudgeOutcome(judge.name, judge.version, model, error=self.redact(reason))

    async def _call(
        self,
        client: Any,
        judge: LLMJudge,
        messages: list[dict[str, str]],
        model: str,
        settings: RuntimeSettings,
        fatal: dict[str, str],
    ) -> tuple[str, int, int]:
        """One chat completion with our retry policy: (reply text, tokens in, tokens out)."""
        import openai

        last = kind = ""
        for attempt in range(settings.max_attempts):
            if "reason" in fatal:
                raise _CallFailed(
                    f"not attempted: an earlier call failed for good ({fatal['reason']})",
                    fatal=True,
                    cause=fatal.get("cause", ""),
                )
            retry_after: float | None = None
            self.accounting.bump(judge, model, calls=1)
            deadline = settings.total_deadline
            try:
                # the client's timeout is per socket read: a judge trickling bytes would never trip it
                response = await asyncio.wait_for(
                    client.chat.completions.create(model=model, messages=messages, **judge.sampling), timeout=deadline
                )
                reply, tin, tout, usage_note = read_completion(response)
                if usage_note:
                    self.accounting.bump(judge, model, usage_ignored=1)
                    self._note_usage(usage_note)
                self.accounting.bump(
                    judge, model, tokens_in=tin, tokens_out=tout, cached_tokens=min(tin, cached_tokens(response))
                )
                size = len(reply.encode("utf-8", "replace"))
                if size > settings.max_reply_bytes:
                    self.accounting.failed(judge, model, "reply too large")
                    raise _CallFailed(
                        f"the judge reply is {size} bytes, over {ENV_MAX_REPLY_BYTES}={settings.max_reply_bytes} "
                        "(not retried, not cached)",
                        cause="reply too large",
                    )
                return reply, tin, tout
            except (asyncio.TimeoutError, DeadlinePassed):
                last = f"no complete reply within the {deadline:g} s deadline"
                kind = f"no complete reply within {deadline:g} s"
            except BodyTooLarge as exc:  # the body was read no further than the cap
                self.accounting.failed(judge, model, "reply too large")
                size = f"{exc.size}" if exc.announced else f"more than {settings.max_body_bytes}"
                raise _CallFailed(
                    f"the judge reply is {size} bytes, over {ENV_MAX_REPLY_BYTES}={settings.max_reply_bytes} (its HTTP "
                    f"body is read up to {settings.max_body_bytes} bytes; not retried, not cached)",
                    cause="reply too large",
                ) from None
            except RedirectRefused as exc:  # the endpoint's address is wrong for every call, like a 404
                reason = self.redact(f"{exc} (not retried)")
                self.accounting.failed(judge, model, "redirect refused")
                if "reason" not in fatal:
                    fatal["reason"], fatal["cause"] = reason, "redirect refused"
                    logger.error(
                        f"judge endpoint answered a redirect ({reason}); the remaining calls of this batch "
                        "are not attempted"
                    )
                raise _CallFailed(reason, fatal=True, cause="redirect refused") from None
            except openai.APIStatusError as exc:
                status = exc.status_code
                last = f"HTTP {status}: {shorten(exc.message)}"
                retryable = status in RETRY_STATUS or status >= 500
                if not retryable:
                    self.accounting.failed(judge, model, f"HTTP {status}")
                    if status in FATAL_STATUS and "reason" not in fatal:
                        fatal["reason"], fatal["cause"] = self.redact(last), f"HTTP {status}"
                        logger.error(
                            f"judge endpoint refused the request ({self.redact(last)}); the remaining calls of this batch are not attempted"
                        )
                    raise _CallFailed(
                        self.redact(f"{last} (not retried)"), fatal=status in FATAL_STATUS, cause=f"HTTP {status}"
                    ) from None
                retry_after = parse_retry_after(exc.response.headers if exc.response is not None else None)
                kind = f"HTTP {status}"
            except openai.APITimeoutError:
                last = kind = f"timeout after {settings.timeout:g} s"
            except openai.APIConnectionError as exc:
                kind = connection_cause(exc)
                last = f"{kind}: {shorten(str(exc.__cause__ or exc))}"
            except MalformedResponse as exc:
                last, kind = f"malformed response: {exc}", "malformed response"
            except (openai.APIResponseValidationError, ValueError) as exc:
                last, kind = f"malformed response: {shorten(str(exc))}", "malformed response"
            except openai.APIError as exc:  # anything else the client raises: treat as transient
                last, kind = f"{type(exc).__name__}: {shorten(str(exc))}", type(exc).__name__
            self.accounting.failed(judge, model, kind)
            if attempt + 1 < settings.max_attempts:
                self.accounting.bump(judge, model, retries=1)
                await asyncio.sleep(self._jitter_delay(settings, attempt, retry_after))
        raise _CallFailed(self.redact(f"gave up after {settings.max_attempts} attempts; last: {last}"), cause=kind)


def _run_sync(factory: Any) -> Any:
    """Run the coroutine made by ``factory`` to completion from synchronous code."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    # called from inside a running event loop (a notebook): use a private loop in a worker thread
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(factory())).result()
