"""Judge accounting: counters per judge model and per judge, the causes of judge errors, and the
accounting JSON and summary line a run writes (docs/judges.md, "Accounting")."""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .base import Judge

ENV_REPORT = "LMMS_EVAL_PLUGINS_JUDGE_REPORT"  # documented in docs/judges.md
ENV_PRICES = "LMMS_EVAL_PLUGINS_JUDGE_PRICES"  # a price table file (docs/judges.md, "Cost"); no price is built in
PRICE_FIELDS = ("input", "cached_input", "output")  # per million tokens
MAX_PRICE = 1e9  # per million tokens: above any real price, and far enough from overflow that every cost is finite
MAX_BATCH_FACTOR = 100.0
MAX_PRICE_FILE_BYTES = 1_000_000


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
    cached_tokens: int = 0  # of tokens_in, served from the provider's prefix cache (usage.prompt_tokens_details)
    batch_calls: int = 0  # requests answered through a Batch API (not counted in calls)
    batch_failed: int = 0  # batch lines without a usable verdict (refused, failed, expired, unparseable)
    batch_tokens_in: int = 0  # of tokens_in, cached_tokens and tokens_out: the part billed at the batch rate
    batch_cached_tokens: int = 0
    batch_tokens_out: int = 0

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
        # judge host -> samples left without a verdict, by the cause of their last failure
        self.error_causes: dict[str, dict[str, int]] = {}
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

    def judge_error(self, judge: Judge, model: str | None, host: str, cause: str) -> None:
        """One sample without a verdict (``judge_errors``), counted by host and cause too (never a key)."""
        self.bump(judge, model, judge_errors=1)
        with self._lock:
            by_cause = self.error_causes.setdefault(host, {})
            by_cause[cause] = by_cause.get(cause, 0) + 1

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            total = Stats()
            for stats in self.by_model.values():
                total.add(stats)
            return {
                "by_model": {k: asdict(v) for k, v in sorted(self.by_model.items())},
                "by_judge": {k: asdict(v) for k, v in sorted(self.by_judge.items())},
                "failures_by_reason": {k: dict(sorted(v.items())) for k, v in sorted(self.failures.items())},
                "judge_errors_by_cause": {k: dict(sorted(v.items())) for k, v in sorted(self.error_causes.items())},
                "totals": asdict(total),
                "endpoints": sorted(self.endpoints),
            }

    @property
    def active(self) -> bool:
        return bool(self.by_model)


def judge_error_causes(causes: Mapping[int, str], host: str) -> str:
    """'12 x connection refused at http://127.0.0.1:9' (most frequent first) for the log line."""
    counts: dict[str, int] = {}
    for cause in causes.values():
        counts[cause] = counts.get(cause, 0) + 1
    return "; ".join(f"{n} x {cause} at {host}" for cause, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def connection_cause(error: BaseException) -> str:
    """What a connection error was, from the exceptions inside it (causes, contexts, groups): "connection
    refused", "host name not found", "TLS error", "connect timeout", else "connection error"."""
    import socket
    import ssl

    seen: set[int] = set()
    stack: list[BaseException | None] = [error]
    while stack:
        exc = stack.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, socket.gaierror) or "Name or service not known" in str(exc):
            return "host name not found"
        if isinstance(exc, ssl.SSLError):
            return "TLS error"
        if isinstance(exc, TimeoutError) or type(exc).__name__ == "ConnectTimeout":
            return "connect timeout"
        stack += [exc.__cause__, exc.__context__, *getattr(exc, "exceptions", ())]
    return "connection error"


# ---- the report ---------------------------------------------------------------------------------


def lmms_eval_output_path(argv: Sequence[str]) -> str | None:
    """The ``--output_path`` folder of an lmms-eval command line, if it names one (the compat layer reads
    the running command's once per run and hands it to the run's judge session)."""
    args = list(argv)
    for i, arg in enumerate(args):
        if arg == "--output_path" and i + 1 < len(args):
            return args[i + 1].rstrip("/") + "/"
        if arg.startswith("--output_path="):
            return arg.split("=", 1)[1].rstrip("/") + "/"
    return None


def accounting_report(accounting: Accounting, cache_path: Path) -> dict[str, Any]:
    """The accounting JSON of one runtime (the caller redacts it)."""
    snap = accounting.snapshot()
    report = {
        "cache_path": str(cache_path),
        **snap,
        "pid": os.getpid(),
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    add_estimated_cost(report)
    return report


# ---- cost ---------------------------------------------------------------------------------------


class PriceTableError(ValueError):
    """The price table file cannot be used; the message names the file, the entry and the fix."""


@dataclass(frozen=True)
class Price:
    """One judge model's prices per million tokens (any currency), and the factor batch calls pay."""

    input: float
    cached_input: float
    output: float
    batch_factor: float = 1.0


def read_prices(path: str | os.PathLike[str]) -> dict[str, Price]:
    """The price table: a JSON object, judge model -> {"input", "cached_input", "output": prices per
    million tokens, "batch_factor": what a batch call pays relative to a synchronous one (default 1)}."""
    from lmms_eval_plugins.data import parse_json

    fix = 'see docs/judges.md, "Cost"'
    try:
        with open(
            path, "rb"
        ) as handle:  # a price table is small: read no more than the cap (a FIFO or 1 GB is refused)
            raw = handle.read(MAX_PRICE_FILE_BYTES + 1)
        if len(raw) > MAX_PRICE_FILE_BYTES:
            raise ValueError(f"over {MAX_PRICE_FILE_BYTES} bytes")
        data = parse_json(raw.decode("utf-8"))  # bounded: 100,000 levels deep is a named error, not a RecursionError
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise PriceTableError(f"price table {path}: cannot read it as JSON ({exc}); {fix}") from None
    if not isinstance(data, dict) or not data:
        raise PriceTableError(f"price table {path}: expected an object of judge model -> prices; {fix}")
    prices = {}
    for model, entry in data.items():
        if not isinstance(entry, dict):
            raise PriceTableError(f"price table {path}: {model!r} is not an object of prices; {fix}")
        unknown = set(entry) - {*PRICE_FIELDS, "batch_factor"}
        if unknown:
            raise PriceTableError(f"price table {path}: {model!r} has unknown field(s) {sorted(unknown)}; {fix}")
        values = {}
        for name in (*PRICE_FIELDS, "batch_factor"):
            value = entry.get(name, 1.0 if name == "batch_factor" else None)
            top = MAX_BATCH_FACTOR if name == "batch_factor" else MAX_PRICE
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= top:
                raise PriceTableError(
                    f"price table {path}: {model!r} field {name!r} is {str(value)[:40]!r}, not a number "
                    f"from 0 to {top:g}; {fix}"
                )
            values[name] = float(value)
        prices[str(model)] = Price(**values)
    return prices


def estimated_cost(stats: Mapping[str, Any], price: Price) -> float:
    """The cost of one accounting row: uncached input, cached input and output tokens at their prices,
    the batch part times ``batch_factor``."""

    def n(name: str) -> int:  # counts as stored (a merged report may hold anything): whole numbers up to 10**15
        value = stats.get(name, 0)
        return min(value, 10**15) if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    def part(tokens_in: int, cached: int, tokens_out: int) -> float:
        cached = min(cached, tokens_in)
        return ((tokens_in - cached) * price.input + cached * price.cached_input + tokens_out * price.output) / 1e6

    batch = part(n("batch_tokens_in"), n("batch_cached_tokens"), n("batch_tokens_out"))
    sync = part(
        max(0, n("tokens_in") - n("batch_tokens_in")),
        max(0, n("cached_tokens") - n("batch_cached_tokens")),
        max(0, n("tokens_out") - n("batch_tokens_out")),
    )
    return sync + price.batch_factor * batch


def cost_section(by_model: Mapping[str, Any], prices: Mapping[str, Price], source: str) -> dict[str, Any]:
    """``estimated_cost`` of a report: per judge model with a price, the total, and the models without one."""
    costs = {
        m: round(estimated_cost(s, prices[m]), 6)
        for m, s in sorted(by_model.items())
        if m in prices and isinstance(s, Mapping)
    }
    if not all(math.isfinite(v) for v in costs.values()):  # never a bare NaN/Infinity in a JSON file
        raise PriceTableError(
            f"price table {source}: the estimated cost is not a finite number; use prices up to {MAX_PRICE:g}"
        )
    unpriced = sorted(
        m
        for m, s in by_model.items()
        if m not in prices
        and not m.startswith("offline:")
        and isinstance(s, Mapping)
        and (s.get("tokens_in") or s.get("tokens_out"))
    )
    return {
        "by_model": costs,
        "total": round(sum(costs.values()), 6),
        "models_without_price": unpriced,
        "price_table": source,
        "note": "estimate from the user's price table, per million tokens",
    }


def add_estimated_cost(report: dict[str, Any], env: Mapping[str, str] | None = None) -> None:
    """Set (or refresh) the report's ``estimated_cost`` when ``LMMS_EVAL_PLUGINS_JUDGE_PRICES`` names a table."""
    env = os.environ if env is None else env
    path = (env.get(ENV_PRICES) or "").strip()
    if not path:
        return
    try:
        report["estimated_cost"] = cost_section(report.get("by_model") or {}, read_prices(path), Path(path).name)
    except PriceTableError as exc:
        report["estimated_cost"] = {"error": str(exc)}


def cost_line(report: Mapping[str, Any]) -> str | None:
    """'estimated judge cost 0.0123 (gpt-4o 0.0123; no price for m2)' from a report's ``estimated_cost``."""
    cost = report.get("estimated_cost")
    if not isinstance(cost, Mapping):
        return None
    if "error" in cost:
        return f"estimated judge cost: none ({cost['error']})"
    parts = [f"{m} {v:.4f}" for m, v in cost.get("by_model", {}).items()]
    parts += [f"no price for {m}" for m in cost.get("models_without_price", [])]
    return f"estimated judge cost {cost.get('total', 0):.4f} ({'; '.join(parts) or 'no priced model'})"


def accounting_report_path(
    cache_path: Path,
    explicit: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    output_path: str | None = None,
) -> Path:
    """Where the accounting JSON goes: ``explicit``, else ``$LMMS_EVAL_PLUGINS_JUDGE_REPORT``, else the
    run's ``output_path`` (the ``--output_path`` of the running lmms-eval command, from its judge session:
    next to its results), else ``judge_report.json`` next to the cache.  A directory gets
    ``judge_report.json`` inside it.  Ranks > 0 of a multi-process run write ``judge_report.rank<R>.json``."""
    env = os.environ if env is None else env
    raw = explicit or env.get(ENV_REPORT) or output_path or ""
    path = Path(raw).expanduser() if raw else cache_path.parent / "judge_report.json"
    if (raw and (str(raw).endswith(("/", os.sep)))) or path.is_dir():
        path = path / "judge_report.json"
    rank = int(env.get("RANK", "0") or 0)
    if rank > 0:
        path = path.with_name(f"{path.stem}.rank{rank}{path.suffix or '.json'}")
    return path


def accounting_summary(accounting: Accounting, cache_path: Path) -> str:
    """The accounting lines logged at the end of a judged run, one per judge model."""
    snap = accounting.snapshot()
    lines = [f"judge accounting (cache {cache_path}):"]
    for model, s in snap["by_model"].items():
        lines.append(
            f"  {model}: verdicts {s['verdicts']}, calls {s['calls']} (retries {s['retries']}, re-asks {s['reasks']}, "
            f"failed {s['failed_calls']}), batch calls {s['batch_calls']}, cache hits {s['cache_hits']}, tokens in "
            f"{s['tokens_in']} (cached {s['cached_tokens']}) / out {s['tokens_out']}, judge errors {s['judge_errors']}"
        )
    return "\n".join(lines)
