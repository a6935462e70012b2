"""Judging through an OpenAI-compatible Batch API (``/v1/files`` + ``/v1/batches``): submit, resume, poll,
ingest (docs/judges.md, "Judging through a Batch API").

The batches of a run folder are recorded in its ``judge_batches.json`` before and after each step
(uploading, uploaded, created), so a score killed at any point resumes them: a request already carried
by a recorded batch is never sent again, and a batch created just before a kill is found again by its
input file. Ingestion reads each output line strictly, parses the verdict with the judge's own parser
(the synchronous path's), and stores it in the judge cache; a line without a verdict (refused, failed,
unparseable, or left unanswered by an expired, failed or cancelled batch) is counted and stays
unscored. Returned verdicts are always kept, whatever the batch's final status.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from .accounting import Accounting
from .base import JudgeConfigError, ReplyParseError
from .batch_requests import (
    BatchRequest,
    OutputLine,
    read_output_line,
    request_line,
    split_batches,
)
from .cache import VerdictCache
from .endpoint import Endpoint
from .redaction import Redactor
from .reply import MalformedResponse, cached_tokens, read_completion

STATE_FILE = "judge_batches.json"
STATE_VERSION = 1
ENV_MAX_REQUESTS = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_REQUESTS"
ENV_MAX_BYTES = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_MAX_BYTES"
ENV_POLL = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_POLL"
DEFAULT_MAX_REQUESTS = 50_000  # OpenAI's limit per batch input file
DEFAULT_MAX_BYTES = 190_000_000  # under OpenAI's 200 MB file limit
DEFAULT_POLL_S = 30.0
TERMINAL = ("completed", "failed", "expired", "cancelled")
# what each final status means for the requests a batch did not answer
OUTCOMES = {"completed": "completed", "failed": "failed: the provider refused the batch (its errors say why)",
            "expired": "expired: not finished within the completion window", "cancelled": "cancelled"}


class BatchStateError(ValueError):
    """``judge_batches.json`` cannot be read; the message names the file and the fix."""


@dataclass(frozen=True)
class BatchSettings:
    max_requests: int = DEFAULT_MAX_REQUESTS
    max_bytes: int = DEFAULT_MAX_BYTES
    poll_s: float = DEFAULT_POLL_S
    timeout: float = 120.0  # per HTTP request of the Batch API (uploads can be large)
    max_reply_bytes: int = 65536

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> BatchSettings:
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        for name, attr, kind in ((ENV_MAX_REQUESTS, "max_requests", int), (ENV_MAX_BYTES, "max_bytes", int), (ENV_POLL, "poll_s", float)):
            raw = (env.get(name) or "").strip()
            if raw:
                try:
                    values[attr] = kind(raw)
                except ValueError:
                    raise JudgeConfigError(f"{name}={raw!r} is not a valid {kind.__name__}") from None
                if values[attr] <= 0:
                    raise JudgeConfigError(f"{name}={raw!r} must be > 0")
        return cls(**values)


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

    @property
    def done(self) -> bool:
        return not self.waiting


# ---- the state file -------------------------------------------------------------------------------


def read_state(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"version": STATE_VERSION, "batches": []}
    fix = f"delete {path.name} to forget these batches (their requests are then submitted again)"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BatchStateError(f"{path}: not readable JSON ({exc}); {fix}") from None
    if not isinstance(data, dict) or data.get("version") != STATE_VERSION or not isinstance(data.get("batches"), list):
        raise BatchStateError(f"{path}: not a version-{STATE_VERSION} batch record; {fix}")
    for i, entry in enumerate(data["batches"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("custom_ids"), list) or not isinstance(entry.get("endpoint"), str):
            raise BatchStateError(f"{path}: batches[{i}] lacks custom_ids or endpoint; {fix}")
    return data


def write_state(path: Path, state: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def covered_ids(state: Mapping[str, Any], endpoint: str) -> set[str]:
    """custom_ids carried by this endpoint's batches that may still return verdicts (not yet ingested)."""
    return {cid for e in state["batches"] if e["endpoint"] == endpoint and not e.get("ingested") for cid in e["custom_ids"]}


# ---- reading a line ---------------------------------------------------------------------------------


def _namespace(value: Any) -> Any:
    if isinstance(value, dict):
        return SimpleNamespace(**{str(k): _namespace(v) for k, v in value.items()})
    if isinstance(value, list):
        return [_namespace(v) for v in value]
    return value


def line_verdict(line: OutputLine, request: BatchRequest, judge: Any, redact: Redactor,
                 max_reply_bytes: int) -> tuple[Any, str, tuple[int, int, int]]:
    """(verdict or None, reply text or why there is none, (tokens in, out, cached)) of one output line,
    through the synchronous path's reader and the judge's own parser."""
    if line.status != 200:
        return None, line.error, (0, 0, 0)
    response = _namespace(line.body)
    try:
        reply, tin, tout, _ = read_completion(response)
    except MalformedResponse as exc:
        return None, f"malformed response: {exc}", (0, 0, 0)
    tokens = (tin, tout, min(tin, cached_tokens(response)))
    if len(reply.encode("utf-8", "replace")) > max_reply_bytes:
        return None, f"the judge reply is over {max_reply_bytes} bytes (not cached)", tokens
    try:
        return judge.parse_reply(redact(reply), request.judge_item()), redact(reply), tokens
    except ReplyParseError as exc:
        return None, f"unparseable reply: {exc}", tokens


# ---- the client side -------------------------------------------------------------------------------


class BatchClient:
    """Submits, resumes, polls and ingests the batches of one run folder."""

    def __init__(self, endpoint: Endpoint, cache: VerdictCache, folder: Path, settings: BatchSettings | None = None,
                 *, log: Callable[[str], None] | None = None, client: Any = None) -> None:
        import openai

        self.endpoint, self.cache, self.settings = endpoint, cache, settings or BatchSettings.from_env()
        self.state_path = folder / STATE_FILE
        self.redact = Redactor()
        self.redact.add(endpoint.api_key)
        self.log = log or (lambda text: print(text, file=sys.stderr, flush=True))
        self.client = client or openai.OpenAI(api_key=endpoint.api_key, base_url=endpoint.base_url, max_retries=3,
                                              timeout=self.settings.timeout)
        self._judges: dict[tuple[str, str], Any] = {}

    # -- submit ---------------------------------------------------------------------------------
    def submit(self, requests: Sequence[BatchRequest], run: BatchRun) -> dict[str, Any]:
        """Record and create batches for the requests no recorded batch carries; finish interrupted submissions."""
        state = read_state(self.state_path)
        host = self.endpoint.display
        covered = covered_ids(state, host)
        new = [r for r in requests if r.custom_id not in covered]
        if new:
            lines = [request_line(r) for r in new]
            for start, end in split_batches([len(x) for x in lines], self.settings.max_requests, self.settings.max_bytes):
                state["batches"].append({"endpoint": host, "custom_ids": [r.custom_id for r in new[start:end]],
                                         "lines": end - start, "bytes": sum(map(len, lines[start:end])),
                                         "status": "recorded", "recorded_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            write_state(self.state_path, state)  # before any upload: a kill from here on creates no second batch
        by_id = {r.custom_id: r for r in requests}
        for entry in state["batches"]:
            if entry["endpoint"] != host or entry.get("ingested"):
                continue
            if entry.get("batch_id"):
                run.resumed.append(entry["batch_id"])
                continue
            self._create(entry, by_id, state, run)
        return state

    def _create(self, entry: dict[str, Any], by_id: Mapping[str, BatchRequest], state: dict[str, Any], run: BatchRun) -> None:
        if entry.get("file_id"):  # killed between the upload and the record of the batch: was it created?
            found = self._batch_of_file(entry["file_id"])
            if found is not None:
                entry.update(batch_id=found, status="created")
                write_state(self.state_path, state)
                run.resumed.append(found)
                return
        if not entry.get("file_id"):
            missing = [cid for cid in entry["custom_ids"] if cid not in by_id]
            lines = [request_line(by_id[cid]) for cid in entry["custom_ids"] if cid in by_id]
            if not lines:  # every request of it has a verdict by now (another score): nothing to send
                entry.update(ingested=True, status="not needed")
                write_state(self.state_path, state)
                return
            entry["custom_ids"] = [cid for cid in entry["custom_ids"] if cid not in missing]
            with tempfile.TemporaryDirectory(prefix="lmms-eval-plugins-batch-") as tmp:
                path = Path(tmp) / "judge_batch.jsonl"
                path.write_bytes(b"".join(lines))
                entry["bytes"] = path.stat().st_size
                with path.open("rb") as handle:
                    uploaded = self.client.files.create(file=handle, purpose="batch")
            entry.update(file_id=uploaded.id, status="uploaded")
            write_state(self.state_path, state)
        batch = self.client.batches.create(input_file_id=entry["file_id"], endpoint="/v1/chat/completions",
                                           completion_window="24h", metadata={"created_by": "lmms-eval-plugins score --batch"})
        entry.update(batch_id=batch.id, status=str(batch.status))
        write_state(self.state_path, state)
        run.submitted.append(batch.id)

    def _batch_of_file(self, file_id: str) -> str | None:
        try:
            for batch in self.client.batches.list(limit=100):
                if getattr(batch, "input_file_id", None) == file_id:
                    return str(batch.id)
        except Exception:  # noqa: BLE001 - a server without listing: create it (at worst one duplicate)
            return None
        return None

    # -- poll and ingest ---------------------------------------------------------------------------
    def collect(self, requests: Sequence[BatchRequest], state: dict[str, Any], run: BatchRun, wait_s: float | None) -> None:
        """Poll until every batch of this endpoint is final (or ``wait_s`` passes), ingesting each as it ends."""
        by_id = {r.custom_id: r for r in requests}
        host = self.endpoint.display
        started, shown = time.monotonic(), ""
        while True:
            active = [e for e in state["batches"] if e["endpoint"] == host and e.get("batch_id") and not e.get("ingested")]
            for entry in active:
                batch = self.client.batches.retrieve(entry["batch_id"])
                entry["status"] = str(batch.status)
                counts = getattr(batch, "request_counts", None)
                entry["done_requests"] = int(getattr(counts, "completed", 0) or 0) + int(getattr(counts, "failed", 0) or 0)
                if entry["status"] in TERMINAL:
                    self._ingest(entry, batch, by_id, run)
                write_state(self.state_path, state)
            active = [e for e in active if not e.get("ingested")]
            line = progress_line(state, host)
            if line != shown:
                self.log(line)
                shown = line
            if not active:
                return
            if wait_s is not None and time.monotonic() - started >= wait_s:
                run.waiting = [e["batch_id"] for e in active]
                return
            time.sleep(self.settings.poll_s if wait_s is None else max(0.0, min(self.settings.poll_s, wait_s - (time.monotonic() - started))))

    def _ingest(self, entry: dict[str, Any], batch: Any, by_id: Mapping[str, BatchRequest], run: BatchRun) -> None:
        lines: list[OutputLine] = []
        for attr in ("output_file_id", "error_file_id"):
            file_id = getattr(batch, attr, None)
            if not file_id:
                continue
            text = self.client.files.content(file_id).text
            for number, raw in enumerate(text.splitlines(), 1):
                if raw.strip():
                    try:
                        lines.append(read_output_line(raw))
                    except (ValueError, TypeError) as exc:
                        self.log(f"judge batch {entry['batch_id']}: {attr} line {number} is not a batch line ({exc}); skipped")
        returned = set()
        verdicts = failed = 0
        for line in lines:
            request = by_id.get(line.custom_id)
            if request is None or line.custom_id not in entry["custom_ids"] or line.custom_id in returned:
                continue  # not this batch's request, or already has a verdict: never trusted
            returned.add(line.custom_id)
            judge = self._judge(request)
            if judge is None:
                run.failures[line.custom_id] = f"judge {request.judge} is not version {request.version} any more"
                failed += 1
                continue
            verdict, reply, (tin, tout, cached) = line_verdict(line, request, judge, self.redact, self.settings.max_reply_bytes)
            run.accounting.bump(judge, request.model, batch_calls=1 if line.status is not None else 0, tokens_in=tin,
                                tokens_out=tout, cached_tokens=cached, batch_tokens_in=tin, batch_cached_tokens=cached,
                                batch_tokens_out=tout)
            if verdict is None:
                run.failures[line.custom_id] = reply
                run.accounting.bump(judge, request.model, batch_failed=1)
                failed += 1
                continue
            detail = {k: self.redact(v) for k, v in verdict.detail.items()}
            self.cache.put(request.key, judge=request.judge, version=request.version, model=request.model,
                           endpoint=request.endpoint, score=verdict.score, detail=detail, reply=reply,
                           tokens_in=tin, tokens_out=tout)
            verdicts += 1
        unanswered = [cid for cid in entry["custom_ids"] if cid not in returned and cid in by_id]
        for cid in unanswered:
            run.failures[cid] = f"the batch {entry['batch_id']} ended {entry['status']} without answering it"
            request = by_id[cid]
            judge = self._judge(request)
            if judge is not None:
                run.accounting.bump(judge, request.model, batch_failed=1)
        errors = getattr(getattr(batch, "errors", None), "data", None) or []
        entry.update(ingested=True, outcome=OUTCOMES.get(entry["status"], entry["status"]), verdicts=verdicts,
                     failed=failed + len(unanswered),
                     errors=[self.redact(f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}")[:300] for e in errors][:5])
        run.outcomes[entry["batch_id"]] = entry["status"]
        run.verdicts += verdicts

    def _judge(self, request: BatchRequest) -> Any:
        key = (request.judge, json.dumps(request.sampling, sort_keys=True))
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
    final = [e for e in entries if e.get("status") in TERMINAL]
    total = sum(len(e["custom_ids"]) for e in entries)
    answered = sum(min(len(e["custom_ids"]), int(e.get("done_requests") or 0)) for e in entries)
    pending = ", ".join(f"{e['batch_id']} {e.get('status')}" for e in entries if e not in final)
    head = f"judge batches: {len(final)}/{len(entries)} final, {answered}/{total} requests done (answered or failed)"
    return head + (f"; {pending}" if pending else "")
