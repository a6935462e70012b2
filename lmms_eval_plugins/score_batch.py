"""``score --batch`` and ``score --dry-run``: the replays around a provider Batch API (docs/score.md).

1. A first replay runs with the judge runtime collecting, instead of calling, every verdict request
   that is not in the judge cache (``LMMS_EVAL_PLUGINS_JUDGE_BATCH_COLLECT``).
2. ``--dry-run`` stops there, printing how many requests there are and their estimated tokens (and
   cost, with a price table). ``--batch`` submits them (:mod:`lmms_eval_plugins.judges.batch`), waits
   and ingests the verdicts into the judge cache.
3. The usual replay then scores from the cache; a request without a batch verdict stays unscored
   (``LMMS_EVAL_PLUGINS_JUDGE_BATCH_CACHE_ONLY``) unless ``--batch-fallback sync`` asks it synchronously.

A resume (the same command again while its batches are not final) skips step 1: the requests it collected
are kept beside the run (``judge_batch_requests.jsonl``), and each batch entry of the signed state records
their SHA-256 and the run's key (:func:`run_key`). They are reused only when every open batch names that
file's hash and this command's key; else the collecting replay runs as before (issue 40, item 4).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import shlex
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from lmms_eval_plugins.judges.accounting import (
    ENV_PRICES,
    PriceTableError,
    Stats,
    add_estimated_cost,
    cost_section,
    read_prices,
)
from lmms_eval_plugins.judges.batch_requests import (
    ENV_CACHE_ONLY,
    ENV_COLLECT,
    estimated_tokens,
    read_collected,
)

EXIT_WAITING = 3  # batches submitted, not final yet: run the printed command later
COLLECT_FILE = "batch_requests.jsonl"
RECORDED_FILE = "judge_batch_requests.jsonl"  # beside the run: the requests its open batches carry
MAX_RECORDED_BYTES = 2 * 2**30  # about a million requests; a bigger file is collected again instead
# What a resume must share with the score that collected: options that change what is asked or scored.
# (Not --batch-wait, --batch-fallback, -v or --prices: they change how long one waits or what is printed.)
_RUN_KEY_SKIPPED_OPTIONS = {"--batch-wait": 1, "--batch-fallback": 1, "--prices": 1, "-v": 0, "--verbose": 0}
_RUN_KEY_SKIPPED_ENV = (ENV_PRICES,)  # and every credential (safe_text.is_credential_name)
RESULTS_KEY = "lmms_eval_plugins_judges"  # where the results JSON keeps the judge accounting (compat results-hook)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch",
        action="store_true",
        help="judge the pending verdicts through the endpoint's Batch API "
        "(/v1/files + /v1/batches; resumable: the batch ids are kept in OUTPUT_PATH's judge_batches.json)",
    )
    parser.add_argument(
        "--batch-wait",
        type=float,
        metavar="SECONDS",
        help="with --batch: stop waiting after SECONDS "
        "(0: submit and exit 3 with the command that collects later; default: until every batch is final)",
    )
    parser.add_argument(
        "--batch-fallback",
        choices=("none", "sync"),
        default="none",
        help="with --batch: what a request "
        "without a batch verdict gets: none (stays unscored, default) or sync (asked synchronously)",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="print how many verdicts would be requested and their "
        "estimated tokens (and cost, with --prices), then exit without calling the judge",
    )
    parser.add_argument(
        "--prices",
        metavar="FILE",
        help=f"a price table (JSON, per judge model; docs/judges.md) for the "
        f"estimated cost in the summary and judge reports (sets {ENV_PRICES})",
    )


def check_arguments(args: argparse.Namespace) -> str | None:
    """Why the batch options cannot be used together (None: they can)."""
    if (args.batch_wait is not None or args.batch_fallback != "none") and not args.batch:
        return "--batch-wait and --batch-fallback go with --batch"
    if args.batch_wait is not None and not (math.isfinite(args.batch_wait) and args.batch_wait >= 0):
        return f"--batch-wait {args.batch_wait} is not a finite number of seconds >= 0 (omit it to wait until every batch is final)"
    if args.batch:
        from lmms_eval_plugins.judges.base import JudgeConfigError
        from lmms_eval_plugins.judges.batch import BatchSettings

        try:
            BatchSettings.from_env()
        except JudgeConfigError as exc:
            return str(exc)
    if args.prices:
        try:
            read_prices(args.prices)
        except PriceTableError as exc:
            return str(exc)
    return None


def dry_run_lines(requests: list[Any], prices_path: str | None, batch: bool) -> list[str]:
    """What a dry run prints: requests and estimated tokens per judge model (and cost with a price table)."""
    by_model: dict[str, Stats] = {}
    for request in requests:
        tin, tout = estimated_tokens(request)
        stats = by_model.setdefault(request.model, Stats())
        stats.calls += 1
        stats.tokens_in += tin
        stats.tokens_out += tout
        if batch:
            stats.batch_tokens_in += tin
            stats.batch_tokens_out += tout
    judges = Counter(f"{r.judge}@{r.version}" for r in requests)
    lines = [
        f"lmms-eval-plugins score --dry-run: {len(requests)} verdict request(s) not in the judge cache would be sent "
        f"{'through the Batch API' if batch else 'synchronously'}; nothing was called"
    ]
    lines += [f"  {judge}: {n}" for judge, n in sorted(judges.items())]
    for model, s in sorted(by_model.items()):
        lines.append(
            f"  {model}: about {s.tokens_in} input tokens (characters/4), at most {s.tokens_out} output tokens "
            "(max_tokens; 0: unset)"
        )
    if prices_path:
        cost = cost_section(
            {m: asdict(s) for m, s in by_model.items()}, read_prices(prices_path), Path(prices_path).name
        )
        lines.append(
            f"  estimated cost at most {cost['total']:.4f} (no cached input assumed)"
            + (f"; no price for {', '.join(cost['models_without_price'])}" if cost["models_without_price"] else "")
        )
    return lines


def collect_later_command(argv: list[str]) -> str:
    """The command that collects the batches later: this one without --batch-wait."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--batch-wait":
            skip = True
            continue
        if not arg.startswith("--batch-wait="):
            out.append(arg)
    return shlex.join(["lmms-eval-plugins", "score", *out])


def run_key(argv: list[str], env: Mapping[str, str], original_path: Path) -> str:
    """What the collected requests depend on, hashed: the command's options that change what is asked
    (:data:`_RUN_KEY_SKIPPED_OPTIONS` left out), the plugin's settings in the environment (secrets left
    out), and the stored run's files (name, size, modification time)."""
    from lmms_eval_plugins.safe_text import is_credential_name

    options, skip = [], 0
    for arg in argv:
        if skip:
            skip -= 1
            continue
        name = arg.split("=", 1)[0]
        if name in _RUN_KEY_SKIPPED_OPTIONS:
            skip = 0 if "=" in arg else _RUN_KEY_SKIPPED_OPTIONS[name]
            continue
        options.append(arg)
    settings = sorted(
        (k, v)
        for k, v in env.items()
        if k.startswith(("LMMS_EVAL_PLUGINS_", "OPENAI_BASE_URL"))
        and k not in _RUN_KEY_SKIPPED_ENV
        and not is_credential_name(k)
    )
    files = []
    for path in sorted(original_path.parent.glob(f"{original_path.name.split('_results')[0]}*")):
        st = path.stat()
        files.append((path.name, st.st_size, st.st_mtime_ns))
    blob = json.dumps({"options": options, "env": settings, "files": files}, sort_keys=True)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def record_requests(requests: list[Any], folder: Path) -> str:
    """Keep the requests beside the run (mode 0600, one atomic write), sorted by key so that the same
    requests collected again give the same bytes; their SHA-256 (hex)."""
    from lmms_eval_plugins.safe_files import atomic_writer

    digest = hashlib.sha256()
    with atomic_writer(folder / RECORDED_FILE, mode=0o600, binary=True) as out:
        for request in sorted(requests, key=lambda r: r.key):
            line = (request.to_json() + "\n").encode("utf-8")
            digest.update(line)
            out.write(line)
    return digest.hexdigest()


def recorded_requests(
    folder: Path, state: Mapping[str, Any], host: str, key: str, scratch: Path
) -> tuple[list[Any], str] | None:
    """(the requests an earlier score recorded, their hash) when every batch still open at ``host`` was
    recorded with this run key and that file's hash; else None (the collecting replay runs)."""
    from lmms_eval_plugins.safe_files import UnsafePathError, read_stored, write_atomic

    open_batches = [e for e in state["batches"] if e["endpoint"] == host and not e.get("ingested")]
    if not open_batches or any(e.get("run_key") != key for e in open_batches):
        return None
    try:
        data, _ = read_stored(folder / RECORDED_FILE, MAX_RECORDED_BYTES)
    except (OSError, ValueError, UnsafePathError):
        return None
    sha = hashlib.sha256(data).hexdigest()
    if any(e.get("requests_sha256") != sha for e in open_batches):
        return None
    copy = scratch / COLLECT_FILE  # parsed from the very bytes that were hashed, in our own scratch folder
    write_atomic(copy, data, mode=0o600)
    try:
        requests = read_collected(copy)
    except ValueError:
        return None
    return requests, sha


def prepare(
    args: argparse.Namespace,
    argv: list[str],
    original_path: Path,
    env: dict[str, str],
    scratch: Path,
    replay: Callable[[dict[str, str], Path], tuple[int, str, Path | None]],
) -> tuple[int | None, Any]:
    """Run the collecting replay, then the dry run or the batches. ``replay(env, out_dir)`` runs lmms-eval and
    returns (exit status, output, results path or None). Returns (exit status to stop with, or None to go on
    to the final replay with ``env`` updated; the batch run, for :func:`merge_accounting`)."""
    from lmms_eval_plugins.judges.batch import (
        BatchClient,
        BatchRun,
        BatchStateError,
        BatchUnreachable,
    )
    from lmms_eval_plugins.judges.batch_state import STATE_FILE, check_state
    from lmms_eval_plugins.judges.cache import (
        CacheSecretError,
        VerdictCache,
        default_cache_path,
    )
    from lmms_eval_plugins.judges.endpoint import endpoint_from_env
    from lmms_eval_plugins.safe_files import UnsafePathError
    from lmms_eval_plugins.safe_text import escape_controls, redact

    collect_file = scratch / COLLECT_FILE
    key = run_key(argv, env, original_path)
    endpoint = endpoint_from_env(env)
    reused = None
    if args.batch and not args.dry_run and endpoint is not None:
        state_cache = VerdictCache(default_cache_path(env))
        try:
            state, problem = check_state(original_path.parent / STATE_FILE, state_cache.secret)
        except CacheSecretError:
            state, problem = None, "no secret"  # the batch client names it, below
        finally:
            state_cache.close()
        if problem is None:
            reused = recorded_requests(original_path.parent, state, endpoint.display, key, scratch)
    if reused is not None:
        requests, requests_sha = reused
        print(
            f"lmms-eval-plugins score: resuming with the {len(requests)} verdict request(s) an earlier score "
            f"recorded ({original_path.parent / RECORDED_FILE}): no collecting replay",
            file=sys.stderr,
        )
    else:
        print(
            "lmms-eval-plugins score: finding the verdicts not in the judge cache (a replay that calls no judge)",
            file=sys.stderr,
        )
        status, output, produced = replay({**env, ENV_COLLECT: str(collect_file)}, scratch / "collect")
        if produced is None:
            tail = "\n".join(output.splitlines()[-40:])
            print(
                f"{tail}\nlmms-eval-plugins score: the collecting replay wrote no results (exit status {status}); "
                "-v shows its output",
                file=sys.stderr,
            )
            return 1, None
        requests = read_collected(collect_file)
        if args.dry_run:
            print("\n".join(dry_run_lines(requests, env.get(ENV_PRICES), args.batch)))
            return 0, None
        requests_sha = record_requests(requests, original_path.parent) if requests else None
    run = BatchRun()
    if requests:
        if endpoint is None:  # the collecting replay found no endpoint either: it collected nothing
            return None, run

        def say(text: str) -> None:  # ids, statuses and errors come from the endpoint: redacted, controls escaped
            print(escape_controls(redact(text, [endpoint.api_key])), file=sys.stderr)

        cache = VerdictCache(default_cache_path(env))
        try:
            client = BatchClient(endpoint, cache, original_path.parent)
            state = client.submit(requests, run, provenance={"requests_sha256": requests_sha, "run_key": key})
            if run.submitted:
                say(
                    f"lmms-eval-plugins score: {len(requests)} verdict request(s) in batch(es) "
                    f"{', '.join(run.submitted)} (recorded in {client.state_path})"
                )
            if run.resumed:
                say(f"lmms-eval-plugins score: resuming batch(es) {', '.join(run.resumed)} of an earlier score")
            client.collect(requests, state, run, args.batch_wait)
        except (BatchStateError, CacheSecretError, UnsafePathError) as exc:
            fix = "" if isinstance(exc, BatchStateError) else " (the judge batches are recorded and verified with it)"
            say(f"lmms-eval-plugins score: error: {exc}{fix}")
            return 2, None
        except BatchUnreachable as exc:
            say(f"lmms-eval-plugins score: {exc}")
            return EXIT_WAITING, run
        except BaseException as exc:
            if type(exc).__name__ in ("Interrupted", "KeyboardInterrupt"):
                print(
                    "lmms-eval-plugins score: the batches keep running at the provider (ids in "
                    f"{original_path.parent / 'judge_batches.json'}); run the same command again to collect them",
                    file=sys.stderr,
                )
            raise
        finally:
            cache.close()
        for batch_id, final in sorted(run.outcomes.items()):
            if final.startswith(("failed:", "not trusted:")):
                say(f"lmms-eval-plugins score: batch {batch_id} {final}")
            elif final != "completed":
                say(
                    f"lmms-eval-plugins score: batch {batch_id} ended {final}: its returned verdicts are kept, the rest "
                    "stay unscored (run score --batch again to submit them)"
                )
        anomalies = {k: v for k, v in run.line_counts().items() if v}
        if anomalies:
            say(
                "lmms-eval-plugins score: judge batch lines not trusted: "
                + ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in anomalies.items())
            )
        if not run.done:
            say(
                f"lmms-eval-plugins score: batch(es) {', '.join(run.waiting)} not final yet; collect them later with:\n"
                f"  {collect_later_command(argv)}"
            )
            return EXIT_WAITING, run
        if run.failures:
            say(
                f"lmms-eval-plugins score: {len(run.failures)} batch request(s) without a verdict "
                f"(e.g. {next(iter(run.failures.values()))[:200]})"
                + ("; asking them synchronously" if args.batch_fallback == "sync" else "")
            )
    if args.batch_fallback != "sync":
        env[ENV_CACHE_ONLY] = (
            "not judged: no verdict from the judge batch (refused, failed or not returned); "
            "run lmms-eval-plugins score --batch again, or with --batch-fallback sync"
        )
    return None, run


def merge_accounting(run: Any, new: dict[str, Any], report_file: Path, env: Mapping[str, str] | None = None) -> None:
    """Add the batch calls (tokens, cached tokens, failed lines) to the accounting of the final replay: the
    results JSON's judge accounting and the judge report beside it. The verdicts themselves are counted by
    the replay (as cache hits)."""
    from lmms_eval_plugins.data import parse_json
    from lmms_eval_plugins.safe_files import write_atomic

    if run is None or not (run.accounting.active or run.outcomes or run.notes):
        return
    extra = run.accounting.snapshot()
    reports = new.get(RESULTS_KEY)
    targets: list[dict[str, Any]] = [r for r in reports if isinstance(r, dict)][:1] if isinstance(reports, list) else []
    disk = None
    if report_file.is_file():
        try:
            disk = parse_json(report_file.read_text(encoding="utf-8"))
            if isinstance(disk, dict):
                targets.append(disk)
            else:
                disk = None
        except (OSError, ValueError):
            disk = None
    if not targets:
        new[RESULTS_KEY] = [dict(extra)]
        targets = new[RESULTS_KEY]
    for report in targets:
        for table in ("by_model", "by_judge"):
            rows = report.setdefault(table, {})
            for key, stats in extra[table].items():
                row = rows.setdefault(key, {})
                for name, value in stats.items():
                    row[name] = _count(row.get(name)) + value
        totals = report.setdefault("totals", {})
        for name, value in extra["totals"].items():
            totals[name] = _count(totals.get(name)) + value
        report["batches"] = {
            "outcomes": dict(sorted(run.outcomes.items())),
            "submitted": run.submitted,
            "resumed": run.resumed,
            "lines_without_verdict": len(run.failures),
            **run.line_counts(),
            "state_set_aside": run.state_set_aside,
        }
        add_estimated_cost(report, env)  # the price table the replays were given
    if disk is not None:  # strict JSON: a cost that is not a finite number is never written as a bare NaN
        write_atomic(report_file, json.dumps(disk, indent=2, sort_keys=True, allow_nan=False) + "\n")


def _count(value: Any) -> int:
    """A stored count as a whole number >= 0 (anything else: 0)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def accounting_lines(new: Mapping[str, Any]) -> list[str]:
    """The judge accounting of the new results in one line per judge model (calls sync/batch, cached
    tokens), and the estimated cost when a price table was given."""
    from lmms_eval_plugins.judges.accounting import cost_line

    lines = []
    for report in new.get(RESULTS_KEY) or []:
        if not isinstance(report, Mapping):
            continue
        for model, s in sorted((report.get("by_model") or {}).items()):
            if isinstance(s, Mapping) and not str(model).startswith("offline:"):
                lines.append(
                    f"  judge {model}: {s.get('calls', 0)} sync call(s), {s.get('batch_calls', 0)} batch call(s), "
                    f"{s.get('cache_hits', 0)} cached verdict(s); input tokens {s.get('tokens_in', 0)} "
                    f"({s.get('cached_tokens', 0)} cached, {int(s.get('tokens_in', 0) or 0) - int(s.get('cached_tokens', 0) or 0)} "
                    f"uncached), output {s.get('tokens_out', 0)}"
                )
        batches = report.get("batches")
        if isinstance(batches, Mapping):
            lines.append(
                "  judge batch lines: "
                + ", ".join(
                    f"{_count(batches.get(name))} {name.replace('_', ' ')}"
                    for name in (
                        "unknown_lines",
                        "duplicate_lines",
                        "conflicting_requests",
                        "lines_answering_other_requests",
                        "unreadable_lines",
                    )
                )
            )
        line = cost_line(report)
        if line:
            lines.append(f"  {line}")
    return lines
