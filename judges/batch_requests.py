"""The pure parts of judging through a provider's Batch API (docs/judges.md, "Judging through a Batch API").

A pending verdict (a request not in the judge cache) becomes one JSONL line of the OpenAI batch input
format, whose ``custom_id`` is derived from the request's cache key: the same request gets the same
id in every run, so a second ``score --batch`` recognises the requests its batches already carry.
Lines are grouped into batches under a provider's limits (requests and bytes per input file), and the
lines of an output or error file are read strictly (each one is untrusted judge output).

The replay that finds the pending requests runs in lmms-eval's process: with :data:`ENV_COLLECT` set,
the judge runtime writes each request it would call to that file (:func:`collect`) instead of calling;
with :data:`ENV_CACHE_ONLY` set, it calls nothing and a missing verdict stays unscored with that text.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .base import JudgeItem

ENV_COLLECT = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_COLLECT"  # set by `score --batch` for its first replay only
ENV_CACHE_ONLY = "LMMS_EVAL_PLUGINS_JUDGE_BATCH_CACHE_ONLY"  # set by `score --batch` for its last replay
COLLECTED = "pending: collected for a Batch API request (not scored in this replay)"
CHAT_URL = "/v1/chat/completions"
ID_PREFIX = "lep-"  # custom_id = prefix + the first 48 hex digits of the request's cache key
ID_HEX = 48
_CUSTOM_ID = re.compile(r"lep-[0-9a-f]{48}")


@dataclass(frozen=True)
class BatchRequest:
    """One pending verdict request, with what ingestion needs to parse its reply and cache the verdict."""

    key: str  # the judge cache key (verdict_key)
    judge: str
    version: str
    model: str
    endpoint: str  # the endpoint's base URL (part of the key; never holds credentials)
    sampling: dict[str, Any]
    messages: list[dict[str, str]]
    item: dict[str, Any] = field(default_factory=dict)

    @property
    def custom_id(self) -> str:
        return custom_id(self.key)

    def judge_item(self) -> JudgeItem:
        points = self.item.get("scoring_points")
        return JudgeItem(
            question=self.item.get("question", ""),
            prediction=self.item.get("prediction", ""),
            reference=self.item.get("reference", ""),
            scoring_points=None if points is None else tuple(points),
            extra=dict(self.item.get("extra") or {}),
            item_id=self.item.get("item_id"),
        )

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, sort_keys=True, default=str)

    @classmethod
    def from_json(cls, text: str) -> BatchRequest:
        from lmms_eval_plugins.data import parse_json

        data = parse_json(text)
        if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
            raise ValueError("not a collected batch request")
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def custom_id(key: str) -> str:
    """The batch line id of a request: stable across runs (a function of the cache key alone)."""
    return ID_PREFIX + key[:ID_HEX]


def is_custom_id(value: Any) -> bool:
    """``value`` has the form of a custom_id this plugin makes (anything else in an output file is unknown)."""
    return isinstance(value, str) and _CUSTOM_ID.fullmatch(value) is not None


def item_fields(item: JudgeItem) -> dict[str, Any]:
    return {
        "question": item.question,
        "prediction": item.prediction,
        "reference": item.reference,
        "scoring_points": None if item.scoring_points is None else list(item.scoring_points),
        "extra": dict(item.extra),
        "item_id": item.item_id,
    }


def request_line(request: BatchRequest) -> bytes:
    """The batch input line (UTF-8, newline-terminated): the same body a synchronous call sends."""
    body = {"model": request.model, "messages": request.messages, **request.sampling}
    line = {"custom_id": request.custom_id, "method": "POST", "url": CHAT_URL, "body": body}
    return (json.dumps(line, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def split_batches(sizes: Sequence[int], max_requests: int, max_bytes: int) -> list[tuple[int, int]]:
    """``[start, end)`` index ranges of consecutive lines, each within ``max_requests`` lines and
    ``max_bytes`` bytes (a single line over ``max_bytes`` gets a range of its own: the provider names it)."""
    if max_requests < 1 or max_bytes < 1:
        raise ValueError("batch limits must be positive")
    ranges: list[tuple[int, int]] = []
    start, used = 0, 0
    for i, size in enumerate(sizes):
        if i > start and (i - start >= max_requests or used + size > max_bytes):
            ranges.append((start, i))
            start, used = i, 0
        used += size
    if start < len(sizes):
        ranges.append((start, len(sizes)))
    return ranges


@dataclass(frozen=True)
class OutputLine:
    """One line of a batch output or error file, read strictly."""

    custom_id: str
    status: int | None  # the HTTP status of the line's response (None: no response, an error line)
    body: Any  # the response body (a chat completion) when status is 200
    error: str  # why the line has no usable response ("" when it has one)


def read_output_line(text: str | bytes) -> OutputLine:
    """A batch output/error line, read with the bounded JSON parser (``data.parse_json``: no RecursionError
    for deep nesting); ValueError when it is not one (the caller names the file and line). A custom_id
    that is not of this plugin's form is kept as given (the caller counts it as unknown), cut to 80 characters."""
    from lmms_eval_plugins.data import parse_json

    if isinstance(text, bytes):
        text = text.decode("utf-8")  # UnicodeDecodeError is a ValueError
    data = parse_json(text)
    if not isinstance(data, dict) or not isinstance(data.get("custom_id"), str):
        raise ValueError("no custom_id")
    cid = data["custom_id"][:80]
    response, error = data.get("response"), data.get("error")
    if isinstance(response, dict):
        status = response.get("status_code")
        status = status if isinstance(status, int) and not isinstance(status, bool) else None
        body = response.get("body")
        if status == 200 and isinstance(body, dict):
            return OutputLine(cid, 200, body, "")
        message = (
            body["error"].get("message") if isinstance(body, dict) and isinstance(body.get("error"), dict) else None
        )
        return OutputLine(cid, status, None, f"HTTP {status}: {str(message or 'no usable body')[:200]}")
    if isinstance(error, dict):
        return OutputLine(
            cid, None, None, f"{str(error.get('code') or 'error')[:60]}: {str(error.get('message') or '')[:200]}"
        )
    return OutputLine(cid, None, None, "no response and no error in the line")


def estimated_tokens(request: BatchRequest) -> tuple[int, int]:
    """(input, output) tokens a request is expected to cost: characters/4 of its messages (no tokenizer
    offline), and its ``max_tokens`` (or ``max_completion_tokens``) as the output ceiling (0 when unset)."""
    chars = sum(len(str(m.get("content", ""))) for m in request.messages)
    out = request.sampling.get("max_tokens") or request.sampling.get("max_completion_tokens") or 0
    return (chars + 3) // 4, int(out) if isinstance(out, (int, float)) and not isinstance(out, bool) else 0


# ---- inside the replay (lmms-eval's process) --------------------------------------------------

_collect_lock = threading.Lock()


def mode(env: Mapping[str, str] | None = None) -> tuple[str, str] | None:
    """("collect", file) or ("cache-only", why) while ``score --batch`` replays; None otherwise."""
    env = os.environ if env is None else env
    if env.get(ENV_COLLECT):
        return "collect", env[ENV_COLLECT]
    if env.get(ENV_CACHE_ONLY):
        return "cache-only", env[ENV_CACHE_ONLY]
    return None


def collect(path: str | os.PathLike[str], requests: Iterable[BatchRequest]) -> int:
    """Append requests to the collect file (one JSON line each; never through a link); how many were written."""
    from lmms_eval_plugins.safe_files import open_append

    lines = [r.to_json() + "\n" for r in requests]
    with _collect_lock, open_append(path) as out:
        out.writelines(lines)
    return len(lines)


def read_collected(path: Path) -> list[BatchRequest]:
    """The collected requests, each once (by key), in first-seen order."""
    seen: dict[str, BatchRequest] = {}
    if not path.is_file():
        return []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    request = BatchRequest.from_json(line)
                except (ValueError, TypeError) as exc:
                    raise ValueError(f"{path} line {number}: {exc}") from None
                seen.setdefault(request.key, request)
    return list(seen.values())
