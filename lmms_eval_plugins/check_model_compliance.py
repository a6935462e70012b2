"""``check-model``: format compliance and failures read from a run (logged samples, metrics, the
log's last exception), and the per-task report they fill; see :mod:`lmms_eval_plugins.check_model`.
"""

from __future__ import annotations

import collections
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmms_eval_plugins.logged_samples import logged_reply

EXAMPLE_CHARS = 160


# ------------------------------------------------------------------------------------------------ compliance


@dataclass
class TaskReport:
    task: str
    benchmark: str
    completed: bool
    error: str | None = None
    requests: int = 0
    parsed: int | None = None
    compliance: float | None = None  # percent
    compliance_source: str = ""  # which logged field (or metric) the compliance was computed from
    typical_failure: dict[str, Any] | None = None
    failures: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    shapes: dict[str, Any] = field(default_factory=dict)
    failed_requests: int = 0  # requests the model class gave up on (its failure marker instead of a reply)
    observed: dict[str, Any] = field(
        default_factory=dict
    )  # what the model class sent (API classes), see observed_summary


def _reply_text(sample: Mapping[str, Any]) -> str:
    text, _ = logged_reply(sample)  # a judged reply is logged inside the filter's JSON
    return text if text is not None else json.dumps(sample.get("resps", sample.get("filtered_resps")), default=str)


def _item_status(item: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(kind, error) of one per-record item, or None when it says nothing about the reply's format.

    Our tasks log one of: ``parse_error`` (None when the reply was read); ``format_ok`` with ``missing``
    ({part: reason}, ViRectify's tagged format); or, for free-form judged answers, only a ``judge``
    outcome, where a reply with nothing to judge (``skipped``) is the format failure.
    """
    if "parse_error" in item:
        error = item["parse_error"]
        return "parse_error", None if error is None else str(error)
    if "format_ok" in item:
        if item["format_ok"]:
            return "format_ok", None
        missing = item.get("missing") or {}
        return "format_ok", "; ".join(f"{k}: {v}" for k, v in missing.items()) if isinstance(
            missing, Mapping
        ) and missing else "format not valid"
    judge = item.get("judge")
    if isinstance(judge, Mapping):
        return "judged", "nothing to judge (no answer found in the reply)" if judge.get("skipped") and not judge.get(
            "error"
        ) else None
    return None


def _parse_item(sample: Mapping[str, Any], metric_names: Sequence[str]) -> tuple[str, str | None] | None:
    """(kind, parse error) from the first per-record item of a logged sample that says something about the format."""
    for value in [*(sample.get(name) for name in metric_names), *sample.values()]:
        if isinstance(value, Mapping):
            status = _item_status(value)
            if status is not None:
                return status
    return None


def failed_reply(sample: Mapping[str, Any]) -> str | None:
    """The model class's failure marker text in a logged sample's replies (``resps``, then
    ``filtered_resps``), or None when the request got a reply (see :mod:`lmms_eval_plugins.outcome`)."""
    from lmms_eval_plugins.outcome import request_failure

    def find(value: Any) -> str | None:
        if isinstance(value, (list, tuple)):
            for item in value:
                found = find(item)
                if found:
                    return found
            return None
        if isinstance(value, str) and value.startswith("{"):  # a judged reply, logged as the filter's JSON
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, Mapping):
                return find(decoded.get("text"))
        return value.strip() if isinstance(value, str) and request_failure(value) else None

    return find(sample.get("resps")) or find(sample.get("filtered_resps"))


def _short(text: str, limit: int = EXAMPLE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compliance_from_samples(samples: Sequence[Mapping[str, Any]], metric_names: Sequence[str]) -> dict[str, Any] | None:
    """Compliance, failure counts and one example per failure from logged samples (None: no parse items)."""
    parsed = total = 0
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    kinds: collections.Counter[str] = collections.Counter()
    for sample in samples:
        if failed_reply(sample):
            continue  # no reply to read: counted as a failed request, not as a format failure
        found = _parse_item(sample, metric_names)
        if found is None:
            continue
        total += 1
        kinds[found[0]] += 1
        error = found[1]
        if error is None:
            parsed += 1
            continue
        key = _normalise_error(str(error))
        counts[key] += 1
        examples.setdefault(key, _reply_text(sample))
    if total == 0:
        return None
    typical = None
    if counts:
        error, count = counts.most_common(1)[0]
        typical = {"parse_error": error, "count": count, "example_output": _short(examples[error])}
    source = {
        "parse_error": "logged parse_error",
        "format_ok": "logged format_ok",
        "judged": "judged replies: not skipped by the judge",
    }[kinds.most_common(1)[0][0]]
    return {
        "requests": total,
        "parsed": parsed,
        "compliance": 100.0 * parsed / total,
        "failures": dict(counts.most_common()),
        "typical_failure": typical,
        "source": source,
    }


def _normalise_error(error: str) -> str:
    """Group parse errors that differ only in the reply's content ("letter A not among ..." stays as is)."""
    return _short(error, 120)


def compliance_from_metrics(metrics: Mapping[str, Any], n_requests: int) -> dict[str, Any] | None:
    fails = {k: v for k, v in metrics.items() if k.endswith("parse_fail") and isinstance(v, (int, float))}
    if not fails or n_requests <= 0:
        return None
    name = "parse_fail" if "parse_fail" in fails else sorted(fails)[0]
    failed = min(float(fails[name]), n_requests)
    return {
        "requests": n_requests,
        "parsed": int(n_requests - failed),
        "compliance": 100.0 * (1 - failed / n_requests),
        "source": f"{name} metric",
    }


_EXC_LINE = re.compile(r"^\s*(?:\S+\.)?(\w*(?:Error|Exception|Exceeded))\b:?\s*(.*)$")


def last_exception(output: str) -> str | None:
    """The last ``SomethingError: message`` line of an lmms-eval log (None: none found).

    lmms-eval retries dataset building (tenacity), so the last line is often a ``RetryError`` that only
    names the real error's class; the real error's own line, printed above it, is preferred.
    """
    found: list[str] = []
    for line in output.splitlines():
        clean = re.sub(r"\x1b\[[0-9;]*m", "", line)
        match = _EXC_LINE.match(clean.split(" - ", 1)[-1])
        if match and match.group(1) not in ("Error", "Exception"):
            found.append(_short(f"{match.group(1)}: {match.group(2)}", 300))
    real = [f for f in found if not f.startswith("RetryError")]
    return (real or found or [None])[-1]
