"""How a run ended, told in a few lines: the error block at the end of a failed run, and ``check-run``.

lmms-eval 0.7.3 catches every exception of an evaluation, prints its traceback (for a data error
raised while a task loads: about 60 lines ending in tenacity's ``RetryError[...]``, with our message
in the middle) and exits with status 0. Two things here:

- :func:`stopped_block`: the plugin error found inside such an exception (through ``RetryError``
  and exception chains), as at most 10 lines naming the problem, the record or file and the fix.
  The evaluate hook (``compat.patches``) prints it as the very last output of the process and records it
  as ``lmms_eval_plugins_failed.json`` in the ``--output_path`` folder.
- ``lmms-eval-plugins check-run OUTPUT_PATH``: exit status 0 when the newest run in the folder wrote
  results and every sample of every task was scored; 1 otherwise, with the reason (the recorded
  error, no results at all, or unscored samples). Use it after ``lmms-eval`` in scripts and CI.
"""

from __future__ import annotations

import argparse
import json
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

from lmms_eval_plugins.cli_run import latest_results
from lmms_eval_plugins.data import parse_json
from lmms_eval_plugins.console import unscored_counts
from lmms_eval_plugins.errors import PluginError

FAILED_MARKER = "lmms_eval_plugins_failed.json"
MAX_BLOCK_LINES = 10
WIDTH = 100


def plugin_error_in(error: BaseException | None) -> PluginError | None:
    """Our error inside ``error``: itself, a cause or context, or the last attempt of a tenacity ``RetryError``."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, PluginError):
            return error
        attempt = getattr(error, "last_attempt", None)  # tenacity.RetryError, without importing tenacity
        inner = None
        if attempt is not None and callable(getattr(attempt, "exception", None)):
            try:
                inner = attempt.exception()
            except BaseException:  # a cancelled future
                inner = None
        error = inner or error.__cause__ or error.__context__
    return None


def _field(label: str, text: str, lines: int) -> list[str]:
    room = WIDTH - 11  # after the 11-character label column
    wrapped = textwrap.wrap(" ".join(str(text).split()), room) or [""]
    if len(wrapped) > lines:
        wrapped = wrapped[:lines]
        wrapped[-1] = wrapped[-1][: room - 4] + " ..."
    return [f"  {label + ':':<9}{wrapped[0]}"] + [f"{'':11}{w}" for w in wrapped[1:]]


def stopped_block(error: PluginError, output_path: str | None) -> str:
    """At most ``MAX_BLOCK_LINES`` lines: what is wrong, where, the fix, and how to check a run."""
    problem = getattr(error, "problem", None) or str(error)
    bar = "=" * WIDTH
    body = _field("problem", problem, 2)
    if getattr(error, "record", None):
        body += _field("record", error.record, 1)  # type: ignore[attr-defined]
    if getattr(error, "path", None):
        body += _field("file", error.path, 1)  # type: ignore[attr-defined]
    if getattr(error, "fix", None):
        body += _field("fix", error.fix, MAX_BLOCK_LINES - 5 - len(body))  # type: ignore[attr-defined]
    check = f"lmms-eval-plugins check-run {output_path.rstrip('/')}" if output_path else "lmms-eval-plugins check-run OUTPUT_PATH"
    lines = [bar, f"lmms-eval-plugins: the run stopped: {type(error).__name__}", *body,
             f"  (lmms-eval exits with status 0 even so; `{check}` exits 1)",
             "  (check the install: lmms-eval-plugins doctor)", bar]
    return "\n".join(lines)  # the fix field takes what the others leave of MAX_BLOCK_LINES


def record_failure(output_path: str | None, error: PluginError) -> Path | None:
    """Write the error into the output folder, for ``check-run``; None when there is no folder or it fails."""
    if not output_path:
        return None
    folder = Path(output_path).expanduser()
    record = {"time": time.time(), "error": type(error).__name__, "problem": getattr(error, "problem", str(error)),
              "record": getattr(error, "record", None), "path": getattr(error, "path", None),
              "fix": getattr(error, "fix", None)}
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / FAILED_MARKER
        target.write_text(json.dumps(record, indent=2, default=str), encoding="utf-8")
        return target
    except OSError:
        return None


def clear_failure(output_path: str | None) -> None:
    """A run that wrote results supersedes an earlier recorded failure in the same folder."""
    if output_path:
        (Path(output_path).expanduser() / FAILED_MARKER).unlink(missing_ok=True)


def check_run(folder: Path, tasks: Sequence[str] = ()) -> tuple[int, list[str]]:
    """(exit status, lines) for the newest run in ``folder`` (an lmms-eval ``--output_path``)."""
    if not folder.is_dir():
        return 1, [f"check-run: {folder} is not a folder: lmms-eval wrote nothing there (was it the --output_path?)"]
    marker = folder / FAILED_MARKER
    results_path = latest_results(folder)
    if marker.is_file() and (results_path is None or marker.stat().st_mtime >= results_path.stat().st_mtime):
        try:
            failure = parse_json(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            failure = {}
        failure = failure if isinstance(failure, dict) else {}
        lines = [f"check-run: FAILED: the last run in {folder} stopped: {failure.get('problem', '(unreadable record)')}"]
        lines += [f"  {k}: {failure[k]}" for k in ("record", "path", "fix") if failure.get(k)]
        return 1, lines
    if results_path is None:
        return 1, [f"check-run: FAILED: no *_results.json under {folder}: the run stopped before writing results "
                   "(its error is in the last lines of its output)"]
    try:
        results = parse_json(results_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return 1, [f"check-run: FAILED: {results_path} is not readable JSON ({exc})"]
    if not isinstance(results, dict):
        return 1, [f"check-run: FAILED: {results_path} is not an lmms-eval results file (not a JSON object)"]
    present = set((results.get("results") or {}))
    missing = [t for t in tasks if t not in present]
    unscored = unscored_counts(results)
    head = f"check-run: {results_path}"
    if not present:
        return 1, [f"{head}: FAILED: no task has results"]
    if missing or unscored:
        lines = [f"{head}: INCOMPLETE"]
        if missing:
            lines.append(f"  no results for: {', '.join(missing)}")
        lines += [f"  {task}: {n} unscored sample(s) (finish them with `lmms-eval-plugins score {folder}`)"
                  for task, n in sorted(unscored.items())]
        return 1, lines
    return 0, [f"{head}: OK, {len(present)} task(s), every sample scored"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins check-run",
        description="Exit 0 when the newest lmms-eval run in OUTPUT_PATH wrote results and scored every sample; "
                    "1 otherwise (lmms-eval itself exits 0 after most errors).")
    parser.add_argument("output_path", type=Path, help="the folder given to lmms-eval as --output_path")
    parser.add_argument("--tasks", default="", help="comma-separated tasks that must have results")
    args = parser.parse_args(argv)
    status, lines = check_run(args.output_path, [t for t in args.tasks.split(",") if t])
    print("\n".join(lines))
    return status


if __name__ == "__main__":
    raise SystemExit(main())
