"""Judging through an OpenAI-compatible Batch API (``/v1/files`` + ``/v1/batches``): submit, resume, poll,
ingest (docs/judges.md, "Judging through a Batch API").

The batches of a run folder are recorded in its ``judge_batches.json`` before and after each step
(uploading, uploaded, created), so a score killed at any point resumes them: a request already carried
by a recorded batch is never sent again, and a batch created just before a kill is found again by its
input file. Ingestion reads each output line strictly, parses the verdict with the judge's own parser
(the synchronous path's), and stores it in the judge cache; a line without a verdict (refused, failed,
unparseable, or left unanswered by an expired, failed or cancelled batch) is counted and stays
unscored. Returned verdicts are always kept, whatever the batch's final status.

Nothing in the run folder is trusted (issue 36). Each entry of the state file is signed (HMAC-SHA256
under the judge cache secret, ``judges/cache.py``) by the machine that recorded it, and only entries
whose signature holds are resumed; a state that does not verify (copied, edited, damaged, over
``LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_STATE_BYTES``, an older format) is set aside under a new name, with a
named warning, and its requests are planned afresh. Output lines are bound to their request: a line whose
custom_id is not its batch's is counted as unknown; two lines for one request that disagree are a judge
error for it; a rubric line whose verdict tag carries another item's nonce answers another request, and
then no verdict of that batch is kept. Every exchange is bounded (``bounded_http``): control calls by a
small cap and the HTTP timeout, output files streamed line by line under
``LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_OUTPUT_BYTES`` and ``..._DOWNLOAD_DEADLINE``, all within ``--batch-wait``.
An API error is a named outcome: a transient one keeps the batch for the next run (exit 3); a refusal
closes the batch, keeping the verdicts it returned, and its other requests are submitted again next time.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .accounting import Accounting
from .base import JudgeConfigError, ReplyParseError, verdict_nonce
from .batch_requests import (
    BatchRequest,
    OutputLine,
    read_output_line,
    request_line,
    split_batches,
)
from .batch_state import (  # noqa: F401 (re-exported: the state file's API is used through this module too)
    DEFAULT_MAX_STATE_BYTES,
    ENV_MAX_STATE_BYTES,
    STATE_FILE,
    BatchStateError,
    check_state,
    covered_ids,
    entry_count,
    entry_id_list,
    entry_ids,
    ids_text,
    read_state,
    set_aside,
    state_text,
    write_state,
)
from .cache import VerdictCache
from .endpoint import Endpoint
from .redaction import Redactor
from .reply import MalformedResponse, cached_tokens, read_completion

ENV_MAX_REQUESTS = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_REQUESTS"
ENV_MAX_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_BYTES"
ENV_POLL = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL"
ENV_MAX_OUTPUT_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_OUTPUT_BYTES"
ENV_DOWNLOAD_DEADLINE = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_DOWNLOAD_DEADLINE"
DEFAULT_MAX_REQUESTS = 50_000  # OpenAI's limit per batch input file
DEFAULT_MAX_BYTES = 190_000_000  # under OpenAI's 200 MB file limit
DEFAULT_POLL_S = 30.0
DEFAULT_MAX_OUTPUT_BYTES = 256 * 2**20  # one output or error file (a judge line is about 1 KB)
DEFAULT_DOWNLOAD_DEADLINE = 600.0  # seconds for one output or error file, in total
CONTROL_MAX_BYTES = 4 * 2**20  # the reply to a control call: a batch or file object, a page of 100 batches
MIN_EXCHANGE_S = 2.0  # the least an exchange gets when --batch-wait is nearly spent (a first poll still happens)
TERMINAL = ("completed", "failed", "expired", "cancelled")
STATUSES = ("validating", "in_progress", "finalizing", "cancelling", *TERMINAL)
# what each final status means for the requests a batch did not answer
OUTCOMES = {
    "completed": "completed",
    "failed": "failed: the provider refused the batch (its errors say why)",
    "expired": "expired: not finished within the completion window",
    "cancelled": "cancelled",
}
_API_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")  # a file or batch id: it goes into a URL path
_TAG_NONCE = re.compile(r"score-([0-9a-f]{12})")


class BatchUnreachable(RuntimeError):
    """The Batch API could not be reached (a connection error, a timeout, HTTP 5xx or 429): the recorded
    batches are kept and the same command collects them later."""


class _OutOfWait(Exception):
    """A download cut by ``--batch-wait`` (not by its own deadline): the batch stays waiting."""


@dataclass(frozen=True)
class BatchSettings:
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_bytes: int = DEFAULT_MAX_BYTES
    poll_s: float = DEFAULT_POLL_S
    timeout: float = 120.0  # per HTTP request of the Batch API (uploads can be large)
    max_reply_bytes: int = 65536
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES
    download_deadline: float = DEFAULT_DOWNLOAD_DEADLINE
    max_state_bytes: int = DEFAULT_MAX_STATE_BYTES

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BatchSettings:
        """The settings in the environment, read by ``settings.env_number`` (nan, inf and values below the
        minimum are a :class:`JudgeConfigError` naming the variable)."""
        from lmms_eval_plugins.settings import BadSetting, env_number

        spec = (
            (ENV_MAX_REQUESTS, "max_requests", True, 1),
            (ENV_MAX_BYTES, "max_bytes", True, 1),
            (ENV_POLL, "poll_s", False, 0.01),
            (ENV_MAX_OUTPUT_BYTES, "max_output_bytes", True, 1024),
            (ENV_DOWNLOAD_DEADLINE, "download_deadline", False, 1.0),
            (ENV_MAX_STATE_BYTES, "max_state_bytes", True, 1024),
        )
        values: dict[str, Any] = {}
        for name, attr, whole, minimum in spec:
            try:
                values[attr] = env_number(name, getattr(cls, attr), whole=whole, minimum=minimum, env=env)
            except BadSetting as exc:
                raise JudgeConfigError(
                    f"{exc}; unset it or give a finite {'whole ' if whole else ''}number >= {minimum:g}"
                ) from None
        return cls(**values)

    @property
    def max_line_bytes(self) -> int:
        """The longest output line read: a reply at the cap, JSON-escaped (up to 6 bytes a character), and its envelope."""
        return 6 * self.max_reply_bytes + 65536


@dataclass
class BatchRun:
    """What one ``score --batch`` did with the batches of a folder."""

    submitted: list[str] = field(default_factory=list)  # batch ids created by this run
    resumed: list[str] = field(default_factory=list)  # batch ids of earlier runs, found in the state file
    waiting: list[str] = field(default_factory=list)  # batch ids not finished when this run stopped waiting
    outcomes: dict[str, str] = field(default_factory=dict)  # batch id -> final status (named outcome)
    verdicts: int = 0  # verdicts stored in the cache by this run
    failures: dict[str, str] = field(default_factory=dict)  # custom_id -> why its line gave no verdict
    accounting: Accounting = field(default_factory=Accounting)
    notes: list[str] = field(default_factory=list)  # named outcomes to print (set-aside state, unreachable API)
    unknown_lines: int = 0  # output lines whose custom_id is not one of their batch's requests
    duplicate_lines: int = 0  # second and later lines for one request
    conflicting: int = 0  # requests whose lines disagree (a judge error each)
    relabelled: int = 0  # lines whose verdict tag carries another request's nonce
    unreadable_lines: int = 0  # lines that are not batch lines (bad JSON, too deep, too long)
    state_set_aside: str | None = None  # the name the untrusted state file was moved to

    @property
    def done(self) -> bool:
        return not self.waiting

    def line_counts(self) -> dict[str, int]:
        return {
            "unknown_lines": self.unknown_lines,
            "duplicate_lines": self.duplicate_lines,
            "conflicting_requests": self.conflicting,
            "lines_answering_other_requests": self.relabelled,
            "unreadable_lines": self.unreadable_lines,
        }


# ---- reading a line ---------------------------------------------------------------------------------


def _namespace(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


@dataclass(frozen=True)
class Answer:
    """What one output line says about its request."""

    verdict: Any  # the judge's Verdict, or None
    why: str  # the redacted reply, or why there is no verdict
    tokens: tuple[int, int, int]  # tokens in, out, cached
    answered: bool  # the line carries a response (counted as a batch call)
    relabelled: bool = False  # its verdict tag carries another request's nonce

    @property
    def score(self) -> float | None:
        return None if self.verdict is None else self.verdict.score


def line_verdict(
    line: OutputLine,
    request: BatchRequest,
    judge: Any,
    redact: Redactor,
    max_reply_bytes: int,
    others: Callable[[], set[str]] | None = None,
) -> Answer:
    """The verdict of one output line, through the synchronous path's reader and the judge's own parser.
    ``others()``: the verdict-tag nonces of the batch's other requests (a reply carrying one answers another request)."""
    if line.status != 200:
        return Answer(None, line.error, (0, 0, 0), line.status is not None)
    response = _namespace(line.body)
    try:
        reply, tin, tout, _ = read_completion(response)
        tokens = (tin, tout, min(tin, cached_tokens(response)))
    except (MalformedResponse, TypeError, ValueError, AttributeError) as exc:
        return Answer(None, f"malformed response: {str(exc)[:200]}", (0, 0, 0), True)
    if len(reply.encode("utf-8", "replace")) > max_reply_bytes:
        return Answer(None, f"the judge reply is over {max_reply_bytes} bytes (not cached)", tokens, True)
    text = redact(reply)
    item = request.judge_item()
    try:
        return Answer(judge.parse_reply(text, item), text, tokens, True)
    except ReplyParseError as exc:
        own = verdict_nonce(item)
        tagged = {m for m in _TAG_NONCE.findall(text) if m != own}
        relabelled = bool(tagged and others is not None and tagged & others())
        why = (
            "the line answers another request (its verdict tag carries another item's nonce)"
            if relabelled
            else f"unparseable reply: {exc}"
        )
        return Answer(None, why, tokens, True, relabelled)


def _api_id(value: Any, what: str) -> str:
    """A file or batch id from the API, checked before it goes into a URL path or the state."""
    if isinstance(value, str) and _API_ID.fullmatch(value) and ".." not in value:
        return value
    raise ValueError(f"the {what} {str(value)[:60]!r} is not an id")


def _status(value: Any) -> str:
    if isinstance(value, str) and value in STATUSES:
        return value
    raise ValueError(f"the batch status {str(value)[:60]!r} is not one of {', '.join(STATUSES)}")


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 10**9 else 0


def classify(exc: BaseException) -> tuple[bool, str] | None:
    """(transient?, what happened) for an exchange that failed; None for an exception that is not one.
    Transient (the batch is kept for the next run): no connection, a timeout or deadline, HTTP 408/409/429/5xx.
    Otherwise a refusal or an unreadable reply (HTTP 4xx, a redirect, a reply over its cap, wrong types, deep nesting)."""
    import openai

    from lmms_eval_plugins.bounded_http import (
        BodyTooLarge,
        DeadlinePassed,
        RedirectRefused,
    )

    if isinstance(exc, DeadlinePassed):
        return True, str(exc)
    if isinstance(exc, openai.APITimeoutError):
        return True, "timed out"
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, (BodyTooLarge, DeadlinePassed, RedirectRefused)):
            return classify(cause)
        return True, f"connection error ({type(cause).__name__ if cause else 'no connection'})"
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        body = exc.body.get("message") if isinstance(exc.body, dict) else None
        text = f"HTTP {status}" + (f": {str(body)[:200]}" if body else "")
        return status in (408, 409, 429) or status >= 500, text
    if isinstance(exc, (BodyTooLarge, RedirectRefused)):
        return False, str(exc)
    if isinstance(exc, RecursionError):
        return False, "an unreadable reply (JSON nested too deep)"
    if isinstance(exc, (ValueError, TypeError, AttributeError, KeyError, IndexError)):
        return False, f"an unreadable reply ({str(exc)[:200] or type(exc).__name__})"
    return None


def classified(exc: BaseException) -> tuple[bool, str]:
    """:func:`classify`, re-raising an exception that is not a failed exchange (a bug stays a traceback)."""
    failure = classify(exc)
    if failure is None:
        raise exc
    return failure


# ---- the client side -------------------------------------------------------------------------------


class BatchClient:
    """Submits, resumes, polls and ingests the batches of one run folder."""

    def __init__(
        self,
        endpoint: Endpoint,
        cache: VerdictCache,
        folder: Path,
        settings: BatchSettings | None = None,
        *,
        log: Callable[[str], None] | None = None,
        client: Any = None,
    ) -> None:
        self.endpoint, self.cache, self.settings = endpoint, cache, settings or BatchSettings.from_env()
        self.state_path = folder / STATE_FILE
        self.redact = Redactor()
        self.redact.add(endpoint.api_key)
        self._log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self._client = client  # one client for every exchange (tests); else a bounded one per exchange
        self._judges: dict[tuple[str, str], Any] = {}
        self._saved: str | None = None  # the text last written: the state is written only when it changed

    def log(self, text: str) -> None:
        from lmms_eval_plugins.safe_text import escape_controls, redact

        self._log(escape_controls(redact(text, [self.endpoint.api_key])))

    def _api(self, deadline: float, max_bytes: int, retries: int = 0) -> Any:
        if self._client is not None:
            return self._client
        from lmms_eval_plugins.bounded_http import openai_client

        return openai_client(
            self.endpoint.base_url,
            self.endpoint.api_key,
            timeout=min(self.settings.timeout, deadline),
            deadline=deadline,
            max_bytes=max_bytes,
            max_retries=retries,
        )

    @staticmethod
    def _within(seconds: float, until: float | None) -> tuple[float, bool]:
        """(the deadline of an exchange, whether --batch-wait is what limits it)."""
        if until is None or until - time.monotonic() >= seconds:
            return seconds, False
        return max(until - time.monotonic(), MIN_EXCHANGE_S), True

    # -- the state ----------------------------------------------------------------------------------
    def load(self, run: BatchRun | None = None) -> dict[str, Any]:
        """The verified state; an untrusted file is set aside (renamed, never deleted) with a named warning.
        The judge cache secret signs it: a bad secret is the cache's named ``CacheSecretError``."""
        state, problem = check_state(self.state_path, self.cache.secret, self.settings.max_state_bytes)
        if problem is None:
            return state
        try:
            aside = set_aside(self.state_path)
        except OSError as exc:
            raise BatchStateError(
                f"{self.state_path} {problem}, and it could not be set aside ({exc}); move it away "
                "and run the same command again"
            ) from None
        kept = len(state["batches"])
        note = (
            f"judge batch state not trusted: {self.state_path} {problem}; set aside as {aside.name} (kept, not "
            f"deleted); {f'{kept} batch(es) it holds that this user recorded are resumed, ' if kept else ''}"
            "the other requests are planned afresh"
        )
        self.log(note)
        if run is not None:
            run.notes.append(note)
            run.state_set_aside = aside.name
        self._saved = None
        if kept:
            self._save(state)
        return state

    def _save(self, state: dict[str, Any]) -> None:
        text = state_text(state, self.cache.secret)
        if text != self._saved:  # each poll would otherwise rewrite it unchanged
            from lmms_eval_plugins.safe_files import write_atomic

            write_atomic(self.state_path, text, mode=0o600)
            self._saved = text

    def _close(
        self,
        entry: dict[str, Any],
        why: str,
        by_id: Mapping[str, BatchRequest],
        run: BatchRun,
        *,
        verdicts: int = 0,
        failed: int = 0,
    ) -> None:
        """End a batch that cannot be used further: its requests without a verdict are submitted again next time."""
        name = entry.get("batch_id") or f"(not created, file {entry.get('file_id') or 'not uploaded'})"
        left = [cid for cid in entry_id_list(entry) if cid in by_id and cid not in run.failures]
        for cid in left:
            run.failures[cid] = f"batch {name}: {why}"
        entry.update(ingested=True, outcome=f"failed: {why}"[:500], verdicts=verdicts, failed=failed + len(left))
        run.outcomes[name] = f"failed: {why}"
        run.verdicts += verdicts

    # -- submit ---------------------------------------------------------------------------------
    def submit(
        self, requests: Sequence[BatchRequest], run: BatchRun, provenance: Mapping[str, str | None] | None = None
    ) -> dict[str, Any]:
        """Record and create batches for the requests no recorded batch carries; finish interrupted submissions.
        ``provenance``: fields each new entry records (signed with it), e.g. where its requests are kept."""
        state = self.load(run)
        self._saved = self._saved or (state_text(state, self.cache.secret) if state["batches"] else None)
        host = self.endpoint.display
        covered = covered_ids(state, host)
        new = [r for r in requests if r.custom_id not in covered]
        if new:
            sizes = [len(request_line(r)) for r in new]
            for start, end in split_batches(sizes, self.settings.max_requests, self.settings.max_bytes):
                state["batches"].append(
                    {
                        "endpoint": host,
                        "ids": ids_text(r.custom_id for r in new[start:end]),
                        "lines": end - start,
                        "bytes": sum(sizes[start:end]),
                        "status": "recorded",
                        "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                        **{k: v for k, v in (provenance or {}).items() if v is not None},
                    }
                )
            self._save(state)  # before any upload: a kill from here on creates no second batch
        by_id = {r.custom_id: r for r in requests}
        for entry in state["batches"]:
            if entry["endpoint"] != host or entry.get("ingested"):
                continue
            if entry.get("batch_id"):
                run.resumed.append(entry["batch_id"])
                continue
            self._create(entry, by_id, state, run)
        return state

    def _create(
        self,
        entry: dict[str, Any],
        by_id: Mapping[str, BatchRequest],
        state: dict[str, Any],
        run: BatchRun,
        *,
        again: bool = True,
    ) -> None:
        api = self._api(self.settings.timeout, CONTROL_MAX_BYTES, retries=2)
        recorded_file = bool(entry.get("file_id"))
        try:
            if recorded_file:  # killed between the upload and the record of the batch: was it created?
                found = self._batch_of_file(api, entry["file_id"])
                if found is not None:
                    entry.update(batch_id=found, status="created")
                    self._save(state)
                    run.resumed.append(found)
                    return
            else:
                ids = [cid for cid in entry_id_list(entry) if cid in by_id]
                if not ids:  # every request of it has a verdict by now (another score): nothing to send
                    entry.update(ingested=True, status="not needed")
                    self._save(state)
                    return
                data = b"".join(request_line(by_id[cid]) for cid in ids)  # from memory: no temporary file
                entry.update(ids=ids_text(ids), lines=len(ids), bytes=len(data))
                uploaded = api.files.create(file=("judge_batch.jsonl", data), purpose="batch")
                entry.update(file_id=_api_id(uploaded.id, "file id"), status="uploaded")
                self._save(state)
            batch = api.batches.create(
                input_file_id=entry["file_id"],
                endpoint="/v1/chat/completions",
                completion_window="24h",
                metadata={"created_by": "lmms-eval-plugins score --batch"},
            )
            entry.update(batch_id=_api_id(batch.id, "batch id"), status=_status(batch.status))
        except Exception as exc:  # classified: a named outcome, never a traceback
            transient, why = classified(exc)
            if transient:
                raise BatchUnreachable(
                    f"could not reach {self.endpoint.display} while submitting a judge batch ({why}); "
                    f"what was recorded is kept in {self.state_path}: run the same command again"
                ) from None
            if recorded_file and again:  # a recorded input file the endpoint does not know (another key, expired)
                self.log(
                    f"judge batch: the recorded input file {entry['file_id']} was refused by {self.endpoint.display} "
                    f"({why}); uploading its requests again"
                )
                for name in ("file_id", "batch_id"):
                    entry.pop(name, None)
                entry["status"] = "recorded"
                self._save(state)
                self._create(entry, by_id, state, run, again=False)
                return
            self._close(
                entry,
                f"refused by {self.endpoint.display} while submitting ({why}); its requests are "
                "submitted again by the next score --batch",
                by_id,
                run,
            )
            self._save(state)
            return
        self._save(state)
        run.submitted.append(entry["batch_id"])

    def _batch_of_file(self, api: Any, file_id: str) -> str | None:
        try:  # the first page only (100 most recent batches): a listing that never ends is not followed
            for batch in list(api.batches.list(limit=100).data)[:100]:
                if getattr(batch, "input_file_id", None) == file_id:
                    return _api_id(batch.id, "batch id")
        except Exception:  # noqa: BLE001 - a server without listing: create it (at worst one duplicate)
            return None
        return None

    # -- poll and ingest ---------------------------------------------------------------------------
    def collect(
        self, requests: Sequence[BatchRequest], state: dict[str, Any], run: BatchRun, wait_s: float | None
    ) -> None:
        """Poll until every batch of this endpoint is final (or ``wait_s`` passes: every exchange, downloads
        included, ends by then), ingesting each as it ends."""
        by_id = {r.custom_id: r for r in requests}
        host = self.endpoint.display
        started, shown, first = time.monotonic(), "", True
        until = None if wait_s is None else started + wait_s
        while True:
            active = [
                e for e in state["batches"] if e["endpoint"] == host and e.get("batch_id") and not e.get("ingested")
            ]
            for entry in active:
                if not first and until is not None and time.monotonic() >= until:
                    break
                if self._poll(entry, by_id, run, until) == "unreachable":
                    self._save(state)
                    run.waiting = [e["batch_id"] for e in active if not e.get("ingested")]
                    return
                self._save(state)
            first = False
            active = [e for e in active if not e.get("ingested")]
            line = progress_line(state, host)
            if line != shown:
                self.log(line)
                shown = line
            if not active:
                return
            if until is not None and time.monotonic() >= until:
                run.waiting = [e["batch_id"] for e in active]
                return
            time.sleep(
                self.settings.poll_s if until is None else max(0.0, min(self.settings.poll_s, until - time.monotonic()))
            )

    def _poll(
        self, entry: dict[str, Any], by_id: Mapping[str, BatchRequest], run: BatchRun, until: float | None
    ) -> str:
        """Poll one batch and ingest it when final: "polled", "ingested", "waiting" or "unreachable"."""
        deadline, _ = self._within(self.settings.timeout, until)
        try:
            batch = self._api(deadline, CONTROL_MAX_BYTES).batches.retrieve(entry["batch_id"])
            status = _status(getattr(batch, "status", None))
            counts = getattr(batch, "request_counts", None)
            done = _count(getattr(counts, "completed", 0)) + _count(getattr(counts, "failed", 0))
        except Exception as exc:  # classified: a named outcome, never a traceback
            transient, why = classified(exc)
            if transient:
                note = (
                    f"judge batch {entry['batch_id']}: could not poll it at {self.endpoint.display} ({why}); it is kept "
                    "in judge_batches.json: run the same command again"
                )
                self.log(note)
                run.notes.append(note)
                return "unreachable"
            self._close(
                entry,
                f"could not be polled at {self.endpoint.display} ({why}): forgotten (a batch of another key "
                "or account, or gone); its requests are submitted again by the next score --batch",
                by_id,
                run,
            )
            self.log(f"judge batch {entry['batch_id']}: {entry['outcome']}")
            return "ingested"
        entry["status"], entry["done_requests"] = status, done
        if status not in TERMINAL:
            return "polled"
        return self._ingest(entry, batch, by_id, run, until)

    def _lines(self, file_id: str, until: float | None) -> Iterator[tuple[int, bytes | None]]:
        """(line number, line) of one output or error file, streamed under its cap and deadline, never held
        whole; a line over ``max_line_bytes`` is (number, None), its bytes dropped as they come."""
        from lmms_eval_plugins.bounded_http import DeadlinePassed

        deadline, limited = self._within(self.settings.download_deadline, until)
        limit, buf, over, number = self.settings.max_line_bytes, bytearray(), False, 0
        began = time.monotonic()
        try:
            with self._api(deadline, self.settings.max_output_bytes).files.with_streaming_response.content(
                file_id
            ) as response:
                for chunk in response.iter_bytes(65536):
                    start = 0
                    while True:
                        cut = chunk.find(b"\n", start)
                        piece = chunk[start:] if cut < 0 else chunk[start:cut]
                        if not over and len(buf) + len(piece) > limit:
                            over = True
                            buf.clear()
                        elif not over:
                            buf += piece
                        if cut < 0:
                            break
                        number += 1
                        yield number, None if over else bytes(buf)
                        buf.clear()
                        over, start = False, cut + 1
                if (
                    time.monotonic() - began >= deadline
                ):  # a body without a length, cut at the deadline, ends like a whole one
                    raise DeadlinePassed(deadline, 0, self.endpoint.display)
                if buf or over:
                    yield number + 1, None if over else bytes(buf)
        except DeadlinePassed:
            if limited:
                raise _OutOfWait from None
            raise

    def _ingest(
        self, entry: dict[str, Any], batch: Any, by_id: Mapping[str, BatchRequest], run: BatchRun, until: float | None
    ) -> str:
        ids = entry_ids(entry)
        answers: dict[str, Answer] = {}
        conflicting: set[str] = set()
        counts = {"unknown_lines": 0, "duplicate_lines": 0, "unreadable_lines": 0}
        nonces: set[str] | None = None

        def others() -> set[str]:
            nonlocal nonces
            if nonces is None:
                nonces = {verdict_nonce(by_id[cid].judge_item()) for cid in ids if cid in by_id}
            return nonces

        problem = None
        for attr in ("output_file_id", "error_file_id"):
            try:
                file_id = getattr(batch, attr, None)
                if file_id is None:
                    continue
                file_id = _api_id(file_id, attr.replace("_", " "))
                for number, raw in self._lines(file_id, until):
                    self._take(entry, attr, number, raw, ids, by_id, answers, conflicting, counts, others)
            except _OutOfWait:
                return "waiting"  # nothing stored: read again whole by the next poll
            except Exception as exc:  # classified: a named outcome, never a traceback
                transient, why = classified(exc)
                if transient and "deadline" not in why:
                    run.notes.append(
                        f"judge batch {entry['batch_id']}: could not download its {attr.replace('_', ' ')} "
                        f"({why}); it is kept: run the same command again"
                    )
                    self.log(run.notes[-1])
                    return "unreachable"
                fix = (
                    f"raise {ENV_DOWNLOAD_DEADLINE}"
                    if transient
                    else f"raise {ENV_MAX_OUTPUT_BYTES}"
                    if "cap" in why
                    else "check the endpoint"
                )
                problem = (
                    f"its {attr.replace('_', ' ')} could not be read whole ({why}); the verdicts read before are "
                    f"kept, its other requests are submitted again by the next score --batch ({fix} to read it all)"
                )
                break
        relabelled = sum(1 for a in answers.values() if a.relabelled)
        verdicts = failed = 0
        stored: list[dict[str, Any]] = []
        for cid, answer in answers.items():
            request = by_id[cid]
            judge = self._judge(request)
            if judge is None:
                run.failures[cid] = f"judge {request.judge} is not version {request.version} any more"
                failed += 1
                continue
            tin, tout, cached = answer.tokens
            run.accounting.bump(
                judge,
                request.model,
                batch_calls=1 if answer.answered else 0,
                tokens_in=tin,
                tokens_out=tout,
                cached_tokens=cached,
                batch_tokens_in=tin,
                batch_cached_tokens=cached,
                batch_tokens_out=tout,
            )
            why = (
                "the batch returned conflicting lines for this request: a judge error, nothing cached"
                if cid in conflicting
                else f"not trusted: batch {entry['batch_id']} returned {relabelled} line(s) that answer other requests"
                if relabelled and answer.verdict is not None
                else None
                if answer.verdict is not None
                else answer.why
            )
            if why is not None:
                run.failures[cid] = why
                run.accounting.bump(judge, request.model, batch_failed=1)
                failed += 1
                continue
            detail = {k: self.redact(v) for k, v in answer.verdict.detail.items()}
            stored.append(
                dict(
                    key=request.key,
                    judge=request.judge,
                    version=request.version,
                    model=request.model,
                    endpoint=request.endpoint,
                    score=answer.verdict.score,
                    detail=detail,
                    reply=answer.why,
                    tokens_in=tin,
                    tokens_out=tout,
                )
            )
            verdicts += 1
        self.cache.put_many(stored)  # the batch's verdicts in one transaction (was one per verdict)
        status = entry["status"]
        unanswered = [cid for cid in ids if cid not in answers and cid in by_id]
        for cid in unanswered:
            run.failures[cid] = f"the batch {entry['batch_id']} ended {status} without answering it"
            request = by_id[cid]
            judge = self._judge(request)
            if judge is not None:
                run.accounting.bump(judge, request.model, batch_failed=1)
        data = getattr(getattr(batch, "errors", None), "data", None)
        errors = [
            self.redact(f"{str(getattr(e, 'code', ''))[:60]}: {str(getattr(e, 'message', ''))[:200]}")[:300]
            for e in (data if isinstance(data, list) else [])[:5]
        ]
        outcome = OUTCOMES.get(status, status)
        if relabelled:
            outcome = (
                f"not trusted: {relabelled} line(s) answer other requests (their verdict tags carry another item's "
                "nonce), so none of its verdicts were kept; check the endpoint"
            )
        if problem:
            outcome = f"failed: {problem}"
        entry.update(
            ingested=True, outcome=outcome, verdicts=verdicts, failed=failed + len(unanswered), errors=errors, **counts
        )
        run.conflicting += len(conflicting)
        run.relabelled += relabelled
        for name, value in counts.items():
            setattr(run, name, getattr(run, name) + value)
        run.outcomes[entry["batch_id"]] = status if outcome == OUTCOMES.get(status, status) else outcome
        run.verdicts += verdicts
        return "ingested"

    def _take(
        self,
        entry: dict[str, Any],
        attr: str,
        number: int,
        raw: bytes | None,
        ids: set[str],
        by_id: Mapping[str, BatchRequest],
        answers: dict[str, Answer],
        conflicting: set[str],
        counts: dict[str, int],
        others: Callable[[], set[str]],
    ) -> None:
        """Read one output line into ``answers`` (the first line of each request; a later one that disagrees
        makes the request conflicting)."""
        where = f"judge batch {entry['batch_id']}: {attr.replace('_', ' ')} line {number}"
        if raw is None:
            counts["unreadable_lines"] += 1
            self.log(f"{where} is over {self.settings.max_line_bytes} bytes; skipped")
            return
        if not raw.strip():
            return
        try:
            line = read_output_line(raw)
        except (ValueError, TypeError) as exc:
            counts["unreadable_lines"] += 1
            self.log(f"{where} is not a batch line ({str(exc)[:200]}); skipped")
            return
        if line.custom_id not in ids:  # not one of this batch's requests: never trusted
            counts["unknown_lines"] += 1
            return
        request = by_id.get(line.custom_id)
        if request is None:  # this batch's, but its verdict is no longer pending here (another score stored it)
            return
        judge = self._judge(request)
        answer = (
            line_verdict(line, request, judge, self.redact, self.settings.max_reply_bytes, others)
            if judge is not None
            else Answer(None, "judge not available", (0, 0, 0), line.status is not None)
        )
        first = answers.get(line.custom_id)
        if first is None:
            answers[line.custom_id] = answer
            return
        counts["duplicate_lines"] += 1
        if first.score != answer.score:
            conflicting.add(line.custom_id)

    def _judge(self, request: BatchRequest) -> Any:
        try:  # called twice per ingested line: a tuple of the settings, JSON only for an unhashable value
            settings: Any = tuple(sorted(request.sampling.items()))
            hash(settings)
        except TypeError:
            settings = json.dumps(request.sampling, sort_keys=True)
        key = (request.judge, settings)
        if key not in self._judges:
            from .registry import load_judge_class

            try:
                judge = load_judge_class(request.judge)(sampling=request.sampling)
            except Exception:  # noqa: BLE001 - an unknown judge: its lines stay unscored
                judge = None
            self._judges[key] = judge if judge is not None and judge.version == request.version else None
        return self._judges[key]


def progress_line(state: Mapping[str, Any], host: str) -> str:
    """'judge batches: 1/3 final, 5210/10000 requests done; batch_2 in_progress, ...'."""
    entries = [e for e in state["batches"] if e["endpoint"] == host and e.get("batch_id")]
    final = [e for e in entries if e.get("status") in TERMINAL or e.get("ingested")]
    total = sum(entry_count(e) for e in entries)
    answered = sum(min(entry_count(e), int(e.get("done_requests") or 0)) for e in entries)
    pending = ", ".join(f"{e['batch_id']} {e.get('status')}" for e in entries if e not in final)
    head = f"judge batches: {len(final)}/{len(entries)} final, {answered}/{total} requests done (answered or failed)"
    return head + (f"; {pending}" if pending else "")
