"""What a run adds to lmms-eval's console, as pure functions of its results dict: dict metrics shortened
for the table (and no stderr for counts and breakdowns), and the block that ends a run with unscored
samples, naming the judge failures by cause and host with their fix (``run_status``/``check-run``
read the same counts). The hook that prints them is ``compat.patches`` (entry ``console-table``).

:func:`emit` is the one way the plugin's commands print: text from stored runs, servers and models may hold
terminal control sequences (a window title, a clipboard write, an erased line), shown as visible escapes."""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from lmms_eval_plugins.safe_text import escape_controls

JUDGES_KEY = "lmms_eval_plugins_judges"  # the judge accounting the results-hook puts into the results dict
NO_ERROR_BAR_UNITS = ("count", "dict", "list")  # a stderr of these is meaningless: shown as N/A
STDERR_SUFFIXES = ("_stderr", "_stderr_clt", "_stderr_clustered")


def emit(*parts: Any, file: TextIO | None = None, sep: str = " ", flush: bool = False) -> None:
    """Print ``parts`` (to stdout, or ``file``) with control characters and bidi overrides shown as escapes."""
    print(escape_controls(sep.join(str(p) for p in parts)), file=sys.stdout if file is None else file, flush=flush)


def spec_unit(task: str, metric: str) -> str | None:
    """The unit the benchmark spec gives ``metric`` of ``task`` (None: not one of ours)."""
    from lmms_eval_plugins.benchmark import benchmark_of_task

    try:
        spec = benchmark_of_task(task)
        found = spec.task_metrics(task).get(metric) if spec else None
    except Exception:  # noqa: BLE001 - the console table must print even if a spec cannot be read
        return None
    return found.unit if found else None


def _no_error_bar(value: Any, unit: str | None) -> bool:
    if unit is not None:
        return unit in NO_ERROR_BAR_UNITS
    return isinstance(value, (dict, list))  # not one of ours: only breakdowns are known to have none


def display_values(
    result_dict: dict[str, Any], compact: bool = True, unit_of: Callable[[str, str], str | None] = spec_unit
) -> dict[str, Any]:
    """A copy of lmms-eval's results dict for its console table: count and breakdown rows (unit from the
    benchmark spec) and null values get no stderr (lmms-eval prints a 0.0000 it computed over counts), and with
    ``compact`` dict/list values are shortened to ``{N entries, see results JSON}``."""
    shown = copy.deepcopy(result_dict)
    for column in ("results", "groups"):
        for task, metrics in (shown.get(column) or {}).items():
            if not isinstance(metrics, dict):
                continue
            for key, value in list(metrics.items()):
                name, comma, filt = key.partition(",")
                if name.endswith(STDERR_SUFFIXES) or name == "alias":
                    continue
                if value is None or _no_error_bar(value, unit_of(str(task), name)):  # None: unscored, no number
                    for suffix in STDERR_SUFFIXES:
                        if f"{name}{suffix}{comma}{filt}" in metrics:
                            metrics[f"{name}{suffix}{comma}{filt}"] = "N/A"
                if compact and isinstance(value, (dict, list)) and value:
                    metrics[key] = f"{{{len(value)} entries, see results JSON}}"
                elif isinstance(value, str):
                    metrics[key] = escape_controls(value, keep_newlines=False)  # a table cell: one line, no controls
    return shown


def compact_container_values(result_dict: dict[str, Any]) -> dict[str, Any]:
    """A copy of lmms-eval's results dict with dict/list metric values shortened for display."""
    return display_values(result_dict, compact=True)


# cause (as the judge runtime counts it) -> the fix, most specific first
_FIXES: tuple[tuple[str, str], ...] = (
    ("connection refused", "nothing listens there: start the judge server, or point OPENAI_BASE_URL at it"),
    ("host name not found", "the host name does not resolve: check OPENAI_BASE_URL"),
    ("TLS error", "the TLS handshake failed: check the URL's scheme (http/https) and the server's certificate"),
    ("connect timeout", "the host did not answer: check OPENAI_BASE_URL and the network"),
    ("connection error", "check that the judge server is up and OPENAI_BASE_URL is its /v1 URL"),
    ("HTTP 401", "the key was refused: check OPENAI_API_KEY"),
    ("HTTP 403", "the key may not use this model or endpoint: check OPENAI_API_KEY and the account"),
    ("HTTP 404", "no such model or path: check LMMS_EVAL_PLUGINS_JUDGE_MODEL and that OPENAI_BASE_URL ends in /v1"),
    ("HTTP 429", "rate limited: lower LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY, or score again later"),
    ("HTTP 5", "the judge server failed: see its log, then score again"),
    ("HTTP 4", "the server refused the request: see the reason in the logged samples"),
    ("timeout", "raise LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT, or lower LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY"),
    ("no complete reply", "raise LMMS_EVAL_PLUGINS_JUDGE_DEADLINE, or lower LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY"),
    ("unparseable reply", "the judge model does not answer in the verdict format: use a stronger judge model"),
    ("reply too large", "raise LMMS_EVAL_PLUGINS_JUDGE_MAX_REPLY_BYTES, or use a judge model that answers briefly"),
    ("malformed response", "the server's replies are not chat completions: check OPENAI_BASE_URL is an OpenAI API"),
)


def judge_fix(cause: str) -> str:
    """What to do about judge calls that failed with ``cause`` ("HTTP 401", "connection refused", ...)."""
    for prefix, fix in _FIXES:
        if cause.startswith(prefix):
            return fix
    return "see the reason in the logged samples (`unscored`)"


def judge_error_causes(result_dict: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    """(cause, host, samples) of the run's judge errors, most frequent first, from the judge accounting
    in the results dict (hosts only: the accounting never holds a key or a path)."""
    counts: dict[tuple[str, str], int] = {}
    reports = result_dict.get(JUDGES_KEY)
    for report in reports if isinstance(reports, list) else []:
        by_host = report.get("judge_errors_by_cause") if isinstance(report, Mapping) else None
        for host, by_cause in by_host.items() if isinstance(by_host, Mapping) else ():
            for cause, n in by_cause.items() if isinstance(by_cause, Mapping) else ():
                if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                    counts[(str(cause), str(host))] = counts.get((str(cause), str(host)), 0) + n
    return sorted(((c, h, n) for (c, h), n in counts.items()), key=lambda t: (-t[2], t[0], t[1]))


def unscored_counts(result_dict: dict[str, Any]) -> dict[str, int]:
    """Tasks of an lmms-eval results dict with unscored samples: task -> count (filters summed)."""
    counts: dict[str, int] = {}
    groups = {name for name, members in (result_dict.get("group_subtasks") or {}).items() if members}
    for task, metrics in (result_dict.get("results") or {}).items():
        if not isinstance(metrics, dict):
            continue
        n = sum(
            v
            for k, v in metrics.items()
            if k.split(",")[0] == "unscored" and isinstance(v, int) and not isinstance(v, bool)
        )
        if n and task not in groups:
            counts[task] = n
    return counts


def unscored_block(result_dict: dict[str, Any], argv: list[str]) -> str:
    """The error block that ends a run with unscored samples ('' when there are none)."""
    counts = unscored_counts(result_dict)
    if not counts:
        return ""
    total = sum(counts.values())
    from lmms_eval_plugins.judges.accounting import lmms_eval_output_path

    output_path = (lmms_eval_output_path(argv) or "OUTPUT_PATH").rstrip("/")
    kept = "--log_samples" in argv or "--predict_only" in argv
    bar = "=" * 100
    lines = [
        bar,
        f"lmms-eval-plugins: {total} sample(s) are UNSCORED; their metrics are null (never counted as wrong):",
    ]
    lines += [f"  {task}: {n}" for task, n in sorted(counts.items())]
    causes = judge_error_causes(result_dict)
    if causes:
        lines.append("Judge errors (samples), by cause:")
        for cause, host, n in causes:
            lines += [f"  {n} x {cause} at {host}", f"      fix: {judge_fix(cause)}"]
    lines.append(
        "The reason is in each logged sample (`unscored`). Judge failures and --predict_only runs are finished, "
        "without the model, by:"
    )
    lines.append(
        f"    lmms-eval-plugins score {output_path}"
        if kept
        else "    (none here: this run did not log samples; pass --log_samples so `lmms-eval-plugins score` can finish them)"
    )
    lines.append(
        "Failed model requests need the model: run the same command again (with --use_cache DIR only they are asked again)."
    )
    lines.append(bar)
    return "\n" + escape_controls("\n".join(lines))  # task names, causes and hosts come from the results dict
