"""How a run ended, told in a few lines: the error block at the end of a failed run, and ``check-run``.

lmms-eval 0.7.3 catches every exception of an evaluation, prints its traceback (for a data error
raised while a task loads: about 60 lines ending in tenacity's ``RetryError[...]``, with our message
in the middle) and exits with status 0. Two things here:

- :func:`stopped_block`: the plugin error found inside such an exception (through ``RetryError``
  and exception chains), as a short block naming the problem, the record or file and the fix: every
  field wrapped in full, never cut (6 lines around the message; a typical message fits in 10).
  The evaluate hook (``compat.patches``) prints it as the very last output of the process and records it
  as ``lmms_eval_plugins_failed.json`` in the ``--output_path`` folder.
- ``lmms-eval-plugins check-run OUTPUT_PATH``: exit status 0 when the newest run in the folder wrote
  results and every sample of every task was scored; 1 otherwise, with the reason (the recorded
  error, no results at all, or unscored samples). Use it after ``lmms-eval`` in scripts and CI.
  A requested task that does not exist is named with the closest task names (:func:`closest_tasks`).
"""

from __future__ import annotations

import argparse
import difflib
import json
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path

from lmms_eval_plugins.console import emit, unscored_counts
from lmms_eval_plugins.data import parse_json
from lmms_eval_plugins.errors import DataError, PluginError
from lmms_eval_plugins.runs import latest_results
from lmms_eval_plugins.safe_files import write_atomic
from lmms_eval_plugins.safe_text import escape_controls

FAILED_MARKER = "lmms_eval_plugins_failed.json"
WIDTH = 100


class TaskNotFound(PluginError):
    """Requested tasks that lmms-eval does not know (recorded for ``check-run`` like our other errors)."""

    def __init__(self, missing: Sequence[str], known: Sequence[str]) -> None:
        self.missing = list(missing)
        self.problem = f"no task named {', '.join(repr(t) for t in self.missing)}: lmms-eval ran nothing"
        hints = [
            f"{t!r}: did you mean {' or '.join(closest_tasks(t, known))}?"
            for t in self.missing
            if closest_tasks(t, known)
        ]
        self.fix = "; ".join(hints) or "`lmms-eval --tasks list` (or `lmms-eval-plugins tasks`) lists the task names"
        self.record, self.path = None, None
        super().__init__(f"{self.problem} | fix: {self.fix}")


class RunBlockedError(PluginError):
    """What stops a run, every item at once, found before its model loads (``doctor.run_blockers``):
    ``blockers`` and ``warnings`` are (what, why, fix) triples."""

    def __init__(
        self, blockers: Sequence[tuple[str, str, str | None]], warnings: Sequence[tuple[str, str, str | None]] = ()
    ):
        self.blockers, self.warnings = list(blockers), list(warnings)
        count = f"{len(self.blockers)} thing{'s' if len(self.blockers) != 1 else ''}"
        self.problem = f"{count} must be fixed before this run can start (found before the model loaded)"
        self.fix = "; ".join(f"{what}: {fix}" for what, _, fix in self.blockers if fix) or None
        self.record, self.path = None, None
        super().__init__(
            f"{self.problem}: "
            + "; ".join(f"{what}: {why}" for what, why, _ in self.blockers)
            + (f" | fix: {self.fix}" if self.fix else "")
        )


def closest_tasks(name: str, known: Sequence[str], n: int = 3) -> list[str]:
    """Up to ``n`` names of ``known`` closest to the misspelled ``name`` (difflib ratio >= 0.75)."""
    return difflib.get_close_matches(name, list(known), n=n, cutoff=0.75)


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


def _field(label: str, text: str) -> list[str]:
    """``text`` under an 11-character label column, wrapped at WIDTH and never cut (a long word, such as
    a path, is broken across lines rather than shortened)."""
    room = WIDTH - 11
    wrapped = textwrap.wrap(" ".join(str(text).split()), room, break_on_hyphens=False) or [""]
    return [f"  {label + ':':<9}{wrapped[0]}"] + [f"{'':11}{w}" for w in wrapped[1:]]


def doctor_hint(tasks: Sequence[str] = ()) -> str:
    """The doctor command that checks what these tasks need (data, judge), or the install alone."""
    names = [t for t in tasks if isinstance(t, str) and t]
    if names:
        return f"check everything these tasks need: lmms-eval-plugins doctor --tasks {','.join(names)}"
    return "check the install: lmms-eval-plugins doctor"


def stopped_block(error: PluginError, output_path: str | None, tasks: Sequence[str] = ()) -> str:
    """What is wrong, where, the fix (each in full), and how to check a run: 6 lines around the message.
    A :class:`RunBlockedError` lists each blocker with its fix, then its warnings."""
    problem = getattr(error, "problem", None) or str(error)
    bar = "=" * WIDTH
    body = _field("problem", problem)
    if isinstance(error, RunBlockedError):
        for what, why, fix in error.blockers:
            body += _field("blocker", f"{what}: {why}") + (_field("fix", fix) if fix else [])
        for what, why, fix in error.warnings:
            body += _field("warning", f"{what}: {why}") + (_field("fix", fix) if fix else [])
    else:
        for label, attribute in (("record", "record"), ("file", "path"), ("fix", "fix")):
            if getattr(error, attribute, None):
                body += _field(label, getattr(error, attribute))
    check = (
        f"lmms-eval-plugins check-run {output_path.rstrip('/')}"
        if output_path
        else "lmms-eval-plugins check-run OUTPUT_PATH"
    )
    lines = [
        bar,
        f"lmms-eval-plugins: the run stopped: {type(error).__name__}",
        *body,
        f"  (lmms-eval exits with status 0 even so; `{check}` exits 1)",
        f"  ({doctor_hint(tasks)})",
        bar,
    ]
    return escape_controls("\n".join(lines))  # the message may quote a record of a hostile data file


def interrupted_block(output_path: str | None, argv: Sequence[str]) -> str:
    """What a Ctrl-C during a run means, in one block: what is kept, and how to keep replies next time."""
    cached = "--use_cache" in argv or "-c" in argv
    bar = "=" * WIDTH
    lines = [bar, "lmms-eval-plugins: the run was stopped (Ctrl-C)."]
    lines += _field(
        "kept",
        "no results or samples file: lmms-eval writes them only when every task is done"
        + (f" (nothing new under {output_path})" if output_path else ""),
    )
    if cached:
        lines += _field(
            "replies",
            "the replies so far are in your --use_cache folder; with the same "
            "LMMS_CACHE_RUN_ID the same command asks only the rest",
        )
    else:
        lines += _field(
            "next time",
            "LMMS_CACHE_RUN_ID=myrun lmms-eval ... --use_cache cache/ keeps every model reply "
            "as it comes: after a stop the same command asks only the rest (README: Crash recovery)",
        )
    lines += _field("judged", "verdicts already received are in the judge cache and are not asked again")
    return escape_controls("\n".join([*lines, bar]))


def record_failure(output_path: str | None, error: PluginError) -> Path | None:
    """Write the error into the output folder, for ``check-run``; None when there is no folder or it fails."""
    if not output_path:
        return None
    folder = Path(output_path).expanduser()
    record = {
        "time": time.time(),
        "error": type(error).__name__,
        "problem": getattr(error, "problem", str(error)),
        "record": getattr(error, "record", None),
        "path": getattr(error, "path", None),
        "fix": getattr(error, "fix", None),
    }
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / FAILED_MARKER
        write_atomic(target, json.dumps(record, indent=2, default=str))
        return target
    except OSError:
        return None


def clear_failure(output_path: str | None) -> None:
    """A run that wrote results supersedes an earlier recorded failure in the same folder. Called when
    lmms-eval has its results in hand: it never raises."""
    if output_path:
        try:
            (Path(output_path).expanduser() / FAILED_MARKER).unlink(missing_ok=True)
        except OSError:
            pass


def output_path_error(output_path: str | None) -> DataError | None:
    """Why lmms-eval could not save a run's results under ``output_path`` (a file, or a file on its way),
    known before the model loads; None when it can."""
    if not output_path:
        return None
    path = Path(output_path).expanduser()
    for ancestor in (path, *path.parents):
        if ancestor.exists():
            if ancestor.is_dir():
                return None
            where = "is a file" if ancestor == path else f"is inside {ancestor}, which is a file"
            return DataError(
                f"--output_path {path} {where}, not a folder: lmms-eval would run every request "
                "and then fail to save the results",
                path=str(ancestor),
                fix="give --output_path a folder (lmms-eval creates it), e.g. "
                f"--output_path {path.parent / (path.name + '_results')}",
            )
    return None


def check_run(folder: Path, tasks: Sequence[str] = ()) -> tuple[int, list[str]]:
    """(exit status, lines) for the newest run in ``folder`` (an lmms-eval ``--output_path``)."""
    if not folder.is_dir():
        unknown = _unknown_tasks(tasks)
        if unknown:  # the likelier reason nothing was written: lmms-eval refused the task names
            error = TaskNotFound(unknown, _plugin_tasks())
            return 1, [f"check-run: FAILED: {error.problem}, so {folder} was never written", f"  fix: {error.fix}"]
        return 1, [f"check-run: {folder} is not a folder: lmms-eval wrote nothing there (was it the --output_path?)"]
    marker = folder / FAILED_MARKER
    results_path = latest_results(folder)
    if marker.is_file() and (results_path is None or marker.stat().st_mtime >= results_path.stat().st_mtime):
        try:
            failure = parse_json(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            failure = {}
        failure = failure if isinstance(failure, dict) else {}
        lines = [
            f"check-run: FAILED: the last run in {folder} stopped: {failure.get('problem', '(unreadable record)')}"
        ]
        lines += [f"  {k}: {failure[k]}" for k in ("record", "path", "fix") if failure.get(k)]
        return 1, lines
    if results_path is None:
        return 1, [
            f"check-run: FAILED: no *_results.json under {folder}: the run stopped before writing results "
            "(its error is in the last lines of its output)"
        ]
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
        lines += [
            f"  {task}: {n} unscored sample(s) (finish them with `lmms-eval-plugins score {folder}`)"
            for task, n in sorted(unscored.items())
        ]
        return 1, lines
    return 0, [f"{head}: OK, {len(present)} task(s), every sample scored"]


def _plugin_tasks() -> list[str]:
    from lmms_eval_plugins.tasks_command import task_names

    try:
        return sorted(task_names())
    except Exception:  # noqa: BLE001 - an unreadable task folder only costs the hint
        return []


def _unknown_tasks(tasks: Sequence[str]) -> list[str]:
    """Requested tasks that are misspellings of an installed benchmark's task (not one itself, and close to
    one). Other unknown names may be lmms-eval's own tasks, which only lmms-eval's task index knows."""
    known = _plugin_tasks()
    return [t for t in tasks if t not in known and closest_tasks(t, known)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins check-run",
        description="Exit 0 when the newest lmms-eval run in OUTPUT_PATH wrote results and scored every sample; "
        "1 otherwise (lmms-eval itself exits 0 after most errors).",
    )
    parser.add_argument("output_path", type=Path, help="the folder given to lmms-eval as --output_path")
    parser.add_argument("--tasks", default="", help="comma-separated tasks that must have results")
    args = parser.parse_args(argv)
    status, lines = check_run(args.output_path, [t for t in args.tasks.split(",") if t])
    emit("\n".join(lines))  # task names and the recorded error come from the folder: controls shown as escapes
    return status


if __name__ == "__main__":
    raise SystemExit(main())
