"""``lmms-eval-plugins score OUTPUT_PATH``: finish or re-score a stored run without the model.

A run made with ``--log_samples`` stores every reply of the model. This command runs the real
lmms-eval CLI again over the run's tasks with ``--model replay`` (:mod:`lmms_eval_plugins.models.replay`),
which answers each request with its stored reply, so lmms-eval applies the tasks' filters (judges:
cached verdicts are reused, only the missing ones are asked), ``process_results`` and aggregations
exactly as in a normal run. The new ``*_results.json`` and ``*_samples_*.jsonl`` are put beside the
original's (never over a file); the new results name the original model in ``config`` and say where
they come from under ``"lmms_eval_plugins_score"``. ``lmms-eval-plugins report`` shows, per task, the
newest results of a folder, so the re-scored ones.

Exit status: 0 when every task has results and no unscored sample; 1 when samples stay unscored (a
failed model request stays unscored: only the model can answer it), a task has no results or
lmms-eval failed; 2 for bad input (nothing is written); 3 when ``--batch`` stopped waiting for batches that are
not final (:mod:`lmms_eval_plugins.score_batch`); 128+N when ended by signal N (lmms-eval ended too).
See docs/score.md.

The stored run is data, never code (issue 27): task folders come from the installed benchmarks and from
``--include_path`` on this command line only (a stored ``include_path`` is refused), task names must be
plain names, and every forwarded option is type-checked and passed as ``--name=value``.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lmms_eval_plugins import score_batch
from lmms_eval_plugins.outcome import (
    BUDGET_EXCEEDED,
    REQUEST_FAILED,
    UNSCORED_FIELD,
    UNSCORED_METRIC,
)
from lmms_eval_plugins.runs import (
    RESULTS_SUFFIX,
    RunInputError,
    results_stem,
    samples_files,
    samples_path,
)
from lmms_eval_plugins.runs import read_results as read_results_json
from lmms_eval_plugins.console import emit
from lmms_eval_plugins.doc_fields import STRICT_ENV, strict_requested
from lmms_eval_plugins.safe_files import open_append, write_atomic

SCORE_KEY = "lmms_eval_plugins_score"
JUDGE_ENV = "LMMS_EVAL_PLUGINS_JUDGE"
JUDGE_MODEL_ENV = "LMMS_EVAL_PLUGINS_JUDGE_MODEL"
# Unscored because the model gave no reply: replaying the stored reply cannot change that.
MODEL_FAILURES = (REQUEST_FAILED, BUDGET_EXCEEDED)
MAX_REASONS_SHOWN = 5  # distinct unscored reasons printed in full by the summary
# Options of the original command that decide which documents are scored, the prompt each stored reply
# is checked against, or how replies are post-processed before scoring: the replay must use the same.
# Each with the JSON types it may have (anything else is tampering); none names code or a file to load.
FORWARDED_VALUES: dict[str, tuple[type, ...]] = {
    "limit": (int, float),
    "offset": (int,),
    "num_fewshot": (int,),
    "system_instruction": (str,),
    "reasoning_tags": (str,),
}
FORWARDED_SWITCHES = ("process_with_media",)
INCLUDE_FIELD = "config.resolved_cli_args.include_path"
# Concurrent scores of one folder take turns (the later one finds the verdicts cached). The lock lives in
# the temp folder, keyed by the run folder's real path: the run folder itself is never written but for results.
LOCK_PREFIX = "lmms-eval-plugins-score.lock-"
SCRATCH_PREFIX = "lmms-eval-plugins-score-"
OWNER_FILE = "owner.pid"  # in the scratch folder: a later score removes it once this pid is gone
# What labels the run in reports: the original model's, not the replay's.
RUN_CONFIG_KEYS = ("model", "model_args", "model_backend")
RUN_TOP_KEYS = ("model_name", "model_name_sanitized", "model_source")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class ScoreInputError(Exception):
    """Input ``score`` cannot use (exit 2, nothing written); the message names the file and the fix."""


# ------------------------------------------------------------------------------------ the stored run


def read_results(path: Path) -> dict[str, Any]:
    """The results JSON, read and checked by the run reader (one reader for every command)."""
    try:
        return read_results_json(path)
    except RunInputError as exc:
        raise ScoreInputError(str(exc)) from exc


def is_rescore(data: Mapping[str, Any]) -> bool:
    return SCORE_KEY in data


def find_results(output_path: Path, results: str | None = None) -> Path:
    """The results JSON to re-score: ``results`` (a path, or a file name under OUTPUT_PATH), OUTPUT_PATH
    itself when it is one, else the newest one under OUTPUT_PATH that is not itself a re-score (so
    repeated ``score`` calls start from the model's own run; verdicts come from the judge cache)."""
    if output_path.is_file() and output_path.name.endswith(RESULTS_SUFFIX) and not results:
        return output_path
    if not output_path.is_dir():
        raise ScoreInputError(f"{output_path}: no such folder; give the --output_path of an lmms-eval run")
    if results:
        given = Path(results)
        for candidate in (given, output_path / given):
            if candidate.is_file():
                return candidate
        named = sorted(output_path.rglob(given.name))
        if len(named) == 1:
            return named[0]
        raise ScoreInputError(
            f"--results {results}: {'several files of that name' if named else 'no such file'} "
            f"under {output_path}; give its path"
        )
    found = sorted(output_path.rglob(f"*{RESULTS_SUFFIX}"), key=lambda p: (p.name, str(p)))
    if not found:
        raise ScoreInputError(
            f"{output_path}: no *{RESULTS_SUFFIX} in it or below it; give the --output_path of an "
            "lmms-eval run made with --log_samples"
        )
    originals, broken = [], []
    for path in found:
        try:
            if not is_rescore(read_results(path)):
                originals.append(path)
        except ScoreInputError as exc:
            broken.append(str(exc))
    chosen = (originals or found)[-1]  # none readable: reading the newest reports why
    for problem in broken if originals else ():  # another run's broken file must not block this one
        emit(f"lmms-eval-plugins score: skipping {problem}", file=sys.stderr)
    if len(originals) > 1:
        emit(
            f"lmms-eval-plugins score: {len(originals)} runs under {output_path}; re-scoring the newest, {chosen} "
            "(pick another with --results FILE)",
            file=sys.stderr,
        )
    return chosen


def run_tasks(data: Mapping[str, Any], requested: str | None, path: Path) -> list[str]:
    """The run's tasks (not its groups, whose aggregates lmms-eval makes from tasks); a requested
    group stands for its tasks."""
    configs = data.get("configs") or {}
    subtasks = {g: list(m) for g, m in (data.get("group_subtasks") or {}).items() if m}
    leaves = sorted(configs) or sorted(t for t in data["results"] if t not in subtasks)
    if not requested:
        return leaves

    def expand(name: str) -> list[str]:
        if name in leaves:
            return [name]
        if name in subtasks:
            return [t for member in subtasks[name] for t in expand(member)]
        raise ScoreInputError(f"task {name!r} is not in {path} (its tasks: {', '.join(leaves)})")

    out: list[str] = []
    for name in filter(None, (n.strip() for n in requested.split(","))):
        out += [t for t in expand(name) if t not in out]
    if not out:
        raise ScoreInputError("--tasks names no task")
    return out


def check_logged_samples(path: Path, tasks: list[str]) -> dict[str, dict[int, str]]:
    """Every task's samples file is there and reads (before anything runs): task -> doc_id -> its gold
    target, read in one streamed pass per file (the replay reads the replies itself)."""
    from lmms_eval_plugins.logged_samples import ReplayError, load_samples

    missing = [t for t in tasks if not samples_path(path, t).is_file()]
    if missing:
        which = (
            "the run logged no samples" if len(missing) == len(tasks) else f"no logged samples for {', '.join(missing)}"
        )
        raise ScoreInputError(
            f"{path}: {which} (expected {samples_path(path, missing[0]).name} beside it). score replays "
            "the stored replies: re-run lmms-eval with --log_samples"
        )
    targets = {}
    for task in tasks:
        try:
            targets[task] = load_samples(path, task, keep=_target)
        except ReplayError as exc:
            raise ScoreInputError(exc.detail) from exc
    return targets


def _target(sample: Mapping[str, Any]) -> str:
    return str(sample.get("target"))


# ------------------------------------------------------------------------------------------ the replay


def forwarded_options(config: Mapping[str, Any], path: Path | None = None) -> list[str]:
    """The run's options the replay needs, as ``--name=value`` (a value starting with ``-`` stays a value).
    A value of the wrong JSON type is a ScoreInputError naming ``path`` and the field."""
    cli = config.get("resolved_cli_args") or {}
    if not isinstance(cli, Mapping):
        raise ScoreInputError(
            f"{path}: config.resolved_cli_args is not an object: the results file was edited or damaged"
        )
    out: list[str] = []
    for name, types in FORWARDED_VALUES.items():
        value = cli.get(name, config.get(name))
        if value is None or value == "":
            continue
        if isinstance(value, bool) or not isinstance(value, types) or (isinstance(value, str) and "\0" in value):
            raise ScoreInputError(
                f"{path}: config.resolved_cli_args.{name} is {str(value)[:60]!r}, not a "
                f"{' or '.join(t.__name__ for t in types)}: the results file was edited or damaged"
            )
        out.append(f"--{name}={value}")
    return out + [f"--{name}" for name in FORWARDED_SWITCHES if cli.get(name) is True]


def stored_include_paths(config: Mapping[str, Any]) -> list[str]:
    """The ``include_path`` folders a stored run names (lmms-eval keeps a string, a config file a list)."""
    cli = config.get("resolved_cli_args") or {}
    value = cli.get("include_path") if isinstance(cli, Mapping) else None
    if value is None or value == "" or value == []:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def include_options(
    config: Mapping[str, Any], path: Path, given: str | None, installed: Callable[[], list[str]] | None = None
) -> list[str]:
    """``--include_path`` for the replay: only what the user gave on this command line. A stored one that
    is not an installed benchmark's folder (those are always indexed) is refused unless the user gave one:
    loading it would import whatever code the output folder ships (issue 27)."""
    if given:
        return [f"--include_path={Path(given).expanduser().resolve()}"]
    if not stored_include_paths(config):  # the usual case: no benchmark is imported to learn its folder (issue 41)
        return []
    if installed is None:
        from lmms_eval_plugins.discovery import plugin_task_dirs as installed
    ours = {os.path.realpath(folder) for folder in installed()}
    foreign = [p for p in stored_include_paths(config) if os.path.realpath(p) not in ours]
    if foreign:
        raise ScoreInputError(
            f"{path}: {INCLUDE_FIELD} names {foreign[0][:200]!r}: score never loads task code named by a "
            "stored run (it could run anything; the run's tasks come from the installed benchmarks). "
            "If you trust that folder, give it yourself: lmms-eval-plugins score ... --include_path DIR"
        )
    return []


def replay_command(
    path: Path, tasks: list[str], output_dir: Path, config: Mapping[str, Any], include: list[str] | None = None
) -> list[str]:
    samples = path.resolve()
    if "," in str(samples):  # lmms-eval splits --model_args on ',': name the stored run through a comma-free link
        alias = output_dir.parent / "stored-run"
        if not alias.is_symlink():
            from lmms_eval_plugins.safe_files import new_link

            new_link(alias, samples.parent)
        samples = alias / samples.name
    return [
        sys.executable,
        "-m",
        "lmms_eval",
        "--model",
        "replay",
        "--model_args",
        f"samples={samples}",
        "--tasks",
        ",".join(tasks),
        "--output_path",
        str(output_dir),
        "--log_samples",
        "--batch_size",
        "1",
        *forwarded_options(config, path),
        *(include or []),
    ]


def run_replay(command: list[str], env: Mapping[str, str], cwd: Path, verbose: bool) -> tuple[int, str]:
    """Run lmms-eval; its output is returned (and echoed to stderr as it comes with ``verbose``).

    cwd is a scratch folder: ``python -m`` puts the cwd first on sys.path, and a source checkout there
    would shadow the installed package."""
    lines: list[str] = []
    with subprocess.Popen(
        command,
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        start_new_session=True,
        preexec_fn=_die_with_parent(),
    ) as process:  # noqa: PLW1509 (no threads in score)
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                if verbose:
                    sys.stderr.write(line)
        except BaseException:  # a signal (see Interrupted), Ctrl-C, any error: lmms-eval must not outlive us
            end_process_group(process)
            raise
    return process.returncode, "".join(lines)


def end_process_group(process: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM to lmms-eval's process group (its own session), SIGKILL after ``grace_s``; then reap it."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            process.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _die_with_parent() -> Callable[[], None] | None:
    """For the child, on Linux: SIGKILL when score dies, even by SIGKILL (``PR_SET_PDEATHSIG``).
    Elsewhere None: a killed score leaves lmms-eval running (docs/score.md)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def set_death_signal() -> None:
        prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # score died before the call took effect
            os.kill(os.getpid(), signal.SIGKILL)

    return set_death_signal


class Interrupted(Exception):
    """SIGTERM, SIGHUP or SIGINT arrived: unwinds so the child is ended and the scratch folder removed."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@contextlib.contextmanager
def signals_unwind() -> Iterator[None]:
    """While inside: SIGTERM/SIGHUP/SIGINT raise :class:`Interrupted` (the default SIGTERM action would
    kill score without cleaning up). Only the main thread may set handlers; elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, _frame: Any) -> None:
        raise Interrupted(signum)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def remove_stale_scratch(root: Path | None = None) -> None:
    """Remove the scratch folders of scores that were killed (SIGKILL leaves them): their owner pid is gone."""
    for folder in Path(root or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        try:
            if folder.stat().st_uid != os.getuid():
                continue
            owner = int((folder / OWNER_FILE).read_text(encoding="ascii").strip())
        except (OSError, ValueError, AttributeError):
            continue  # not ours, not one of these folders, or its owner has not written the file yet
        if owner != os.getpid() and not _alive(owner):
            shutil.rmtree(folder, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lock_path(folder: Path, root: Path | None = None) -> Path:
    """The lock file of a run folder: ``$TMPDIR/lmms-eval-plugins-score.lock-<hash of its real path>``."""
    key = hashlib.sha256(os.path.realpath(folder).encode("utf-8", "surrogateescape")).hexdigest()[:24]
    return Path(root or tempfile.gettempdir()) / f"{LOCK_PREFIX}{key}"


@contextlib.contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """Hold the folder's :func:`lock_path` (``flock``): a second score on the folder waits, saying so, and
    then finds the first one's verdicts in the judge cache. Released when score exits, however it exits."""
    path = lock_path(folder)
    try:
        import fcntl

        handle = open_append(path, encoding="ascii")  # a link planted in $TMPDIR: UnsafePathError, never followed
    except (ImportError, OSError) as exc:  # no flock (Windows), another user's lock file, a link: go on unlocked
        emit(
            f"lmms-eval-plugins score: cannot lock {path} ({exc}); a concurrent score on {folder} would repeat "
            "judge calls",
            file=sys.stderr,
        )
        yield
        return
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()[:20] or "unknown"
            emit(
                f"lmms-eval-plugins score: another score is running on this folder (pid {holder}), waiting",
                file=sys.stderr,
                flush=True,
            )
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield


def replay_failure(output: str) -> str | None:
    """The replay model's own error in lmms-eval's output (lmms-eval logs it and exits 0)."""
    from lmms_eval_plugins.logged_samples import REPLAY_ERROR_MARK

    for line in _ANSI.sub("", output).splitlines():
        if REPLAY_ERROR_MARK in line:
            message = line.split(REPLAY_ERROR_MARK, 1)[1].strip()
            return message.split(". Please set `--verbosity=DEBUG`")[0]
    return None


def tables(output: str) -> str:
    """lmms-eval's results tables from its output."""
    blocks, block = [], []
    for line in _ANSI.sub("", output).splitlines() + [""]:
        if line.startswith("|"):
            block.append(line)
        elif block:
            blocks.append("\n".join(block))
            block = []
    return "\n\n".join(blocks)


def check_same_run(
    original_path: Path,
    original: Mapping[str, Any],
    new_path: Path,
    new: Mapping[str, Any],
    tasks: list[str],
    stored: Mapping[str, Mapping[int, str]] | None = None,
) -> dict[str, Counter[str]]:
    """The replay scored the documents of the run: same task versions, documents and gold answers.
    (The replay model already refused prompts that differ; this catches what a prompt does not show.)
    ``stored``: the run's targets as :func:`check_logged_samples` read them (else read here). Each new
    samples file is read once, in one streamed pass, which also gives why its samples are unscored:
    task -> reason -> count."""
    from lmms_eval_plugins.logged_samples import load_samples

    redo = "the stored replies answer other questions; re-run the model (or score with the data and task version of the run)"
    reasons: dict[str, Counter[str]] = {}
    for task in tasks:
        if task not in new.get("results", {}):
            continue
        was, now = (original.get("versions") or {}).get(task), (new.get("versions") or {}).get(task)
        if was is not None and now is not None and was != now:
            raise ScoreInputError(
                f"{original_path}: task {task!r} was version {was} in the run and is version {now} now: {redo}"
            )
        targets = (
            stored[task] if stored is not None and task in stored else load_samples(original_path, task, keep=_target)
        )
        counted: Counter[str] = Counter()
        scored = load_samples(new_path, task, keep=lambda sample, counted=counted: _target_and_reasons(sample, counted))
        reasons[task] = counted
        if set(targets) != set(scored):
            raise ScoreInputError(
                f"{samples_path(original_path, task)}: task {task!r} logged {len(targets)} documents, "
                f"it has {len(scored)} now (data changed, or another --limit/--offset): {redo}"
            )
        for doc_id, target in scored.items():
            if target != targets[doc_id]:
                raise ScoreInputError(
                    f"{samples_path(original_path, task)}: task {task!r} doc_id {doc_id}: the gold "
                    f"answer differs from the logged one: {redo}"
                )
    return reasons


def _target_and_reasons(sample: Mapping[str, Any], reasons: Counter[str]) -> str:
    for reason in sample_unscored_reasons(sample):
        reasons[reason] += 1
    return _target(sample)


# ------------------------------------------------------------------------------------------ the outcome


def unscored_counts(results: Mapping[str, Any], tasks: list[str]) -> dict[str, int]:
    """task -> unscored samples (every filter's ``unscored`` metric summed)."""
    counts = {}
    for task in tasks:
        metrics = results.get("results", {}).get(task) or {}
        counted = [(k.split(",")[0], v) for k, v in metrics.items() if isinstance(v, int) and not isinstance(v, bool)]
        n = sum(v for name, v in counted if name == UNSCORED_METRIC)
        if not any(name == UNSCORED_METRIC for name, _ in counted):
            # a task of the documented judged-task recipe counts only its judge errors (docs/judges.md): those
            # samples are unscored too (issue 36), never "every sample scored" beside a null judged metric
            n = max((v for name, v in counted if name == "judge_errors" or name.endswith("_judge_errors")), default=0)
        if n:
            counts[task] = n
    return counts


def unscored_reasons(samples_file: Path) -> Counter[str]:
    """Why the samples of a (just written) samples file are unscored: reason -> count."""
    from lmms_eval_plugins.logged_samples import iter_samples

    reasons: Counter[str] = Counter()
    for sample in iter_samples(samples_file):
        reasons.update(sample_unscored_reasons(sample))
    return reasons


def sample_unscored_reasons(sample: Mapping[str, Any]) -> list[str]:
    """Why one logged sample is unscored (none: scored)."""
    item = sample.get(UNSCORED_METRIC)
    if isinstance(item, Mapping) and item.get(UNSCORED_FIELD):
        return [str(item[UNSCORED_FIELD])]
    if item is None:  # a judged-task recipe's sample: its judge outcome's error, logged once per metric
        errors = {
            str(v["error"]) for v in sample.values() if isinstance(v, Mapping) and v.get("error") and "verdict" in v
        }
        return [f"judge error: {error}" for error in sorted(errors)]
    return []


def mark_rescored(
    new: dict[str, Any], original: Mapping[str, Any], original_path: Path, env: Mapping[str, str]
) -> None:
    """Label the new results with the original run's model, and say where they come from."""
    config, was = new.setdefault("config", {}), original.get("config") or {}
    replay = {key: config.get(key) for key in RUN_CONFIG_KEYS}
    for key in RUN_CONFIG_KEYS:
        config[key] = was.get(key)
    config["model_args"] = redacted_model_args(config.get("model_args"))  # lmms-eval redacts fewer names
    for key in RUN_TOP_KEYS:
        if key in original:
            new[key] = original[key]
    # what the replay did (its own record of the option), else the environment's rule: never a second rule
    options = new.get("lmms_eval_plugins_options")
    done = options.get("strict") if isinstance(options, Mapping) else None
    strict = done if isinstance(done, bool) else strict_requested(env)
    new[SCORE_KEY] = {
        "rescored_from": original_path.name,
        "strict": strict,
        "judge": env.get(JUDGE_ENV) or None,
        "judge_model": env.get(JUDGE_MODEL_ENV) or None,
        "replay": replay,
    }


def redacted_model_args(model_args: Any) -> Any:
    """The stored ``model_args`` (a string or lmms-eval's dict) with credential-like values hidden."""
    from lmms_eval_plugins.compat.private import split_model_args_without_loading
    from lmms_eval_plugins.safe_text import redact_arg, redact_model_args

    if isinstance(model_args, Mapping):
        return {k: redact_arg(k, v) for k, v in model_args.items()}
    # score's own process never needs lmms-eval (its replay runs in a child): no torch import for one split
    return (
        redact_model_args(model_args, split_model_args_without_loading) if isinstance(model_args, str) else model_args
    )


def install(new_path: Path, new: Mapping[str, Any], scratch: Path, dest: Path) -> Path:
    """Copy the new files beside the original, never over a file; the results JSON last, so a reader
    never finds it without its samples."""
    stem = results_stem(new_path)
    files = {dest / p.name: p for p in samples_files(new_path)}
    if (scratch / "judge_report.json").is_file():  # the judge accounting of this re-score
        files[dest / f"judge_report_{stem}.json"] = scratch / "judge_report.json"
    target = dest / new_path.name
    clash = [str(p) for p in [*files, target] if p.exists()]
    if clash:
        raise FileExistsError(f"not overwriting {', '.join(clash)}; run score again in a second")
    from lmms_eval_plugins.safe_files import copy_new, write_new

    for to, source in files.items():
        if not copy_new(source, to):
            raise FileExistsError(f"not overwriting {to}; run score again in a second")
    if not write_new(target, json.dumps(new, indent=2, ensure_ascii=False, default=str), mode=0o644):
        raise FileExistsError(f"not overwriting {target}; run score again in a second")
    return target


def summary(
    original_path: Path,
    target: Path,
    tasks: list[str],
    new: Mapping[str, Any],
    known_reasons: Mapping[str, Counter[str]] | None = None,
) -> tuple[int, list[str]]:
    """(exit status, lines): 1 while a task has no results or unscored samples (``known_reasons``: as
    :func:`check_same_run` counted them, else read from the new samples files)."""
    missing = [t for t in tasks if t not in new.get("results", {})]
    counts = unscored_counts(new, tasks)
    head = f"lmms-eval-plugins score: {len(tasks) - len(missing)}/{len(tasks)} task(s) re-scored from {original_path.name} -> {target}"
    if not missing and not counts:
        return 0, [f"{head}: every sample scored"]
    lines = [
        f"{head}: {sum(counts.values())} sample(s) still unscored"
        + (f", no results for {', '.join(missing)}" if missing else "")
    ]
    model, other = Counter(), Counter()
    numbered: dict[str, int] = {}  # each distinct reason is printed once, in full, under its number
    for task, n in sorted(counts.items()):
        reasons = (known_reasons or {}).get(task)
        if reasons is None:
            reasons = unscored_reasons(samples_path(target, task))
        for reason, _ in reasons.most_common():
            numbered.setdefault(reason, len(numbered) + 1)
        lines.append(
            f"  {task}: {n} unscored: " + "; ".join(f"{k} x reason {numbered[r]}" for r, k in reasons.most_common())
        )
        for reason, k in reasons.items():
            (model if reason in MODEL_FAILURES else other)[reason] += k
    for reason, number in list(numbered.items())[:MAX_REASONS_SHOWN]:
        lines += textwrap.wrap(
            f"reason {number}: {' '.join(reason.split())}",
            100,
            initial_indent="  ",
            subsequent_indent="      ",
            break_on_hyphens=False,
        )
    if len(numbered) > MAX_REASONS_SHOWN:
        lines.append(
            f"  ({len(numbered) - MAX_REASONS_SHOWN} more reasons: each logged sample's `unscored` field says its own)"
        )
    if model:
        lines.append(
            f"  {sum(model.values())} failed model request(s): the stored reply is the failure, so only the model can "
            "answer them: run the original lmms-eval command again (with --use_cache DIR only they are asked again)"
        )
    if other:
        lines.append(
            f"  {sum(other.values())} without a judge verdict: run score again when the judge works "
            f"(--judge NAME, --judge-model M, OPENAI_BASE_URL/OPENAI_API_KEY; cached verdicts are reused)"
        )
    return 1, lines


# ------------------------------------------------------------------------------------------ command


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins score",
        description="Finish or re-score a stored lmms-eval "
        "run without the model: its logged replies are scored again by lmms-eval.",
        epilog="Exit status: 0 all scored, 1 samples unscored or a task failed, 2 bad input, "
        "3 batches not final yet (--batch).",
    )
    parser.add_argument(
        "output_path",
        type=Path,
        help="the --output_path of an lmms-eval run made with --log_samples (or one *_results.json)",
    )
    parser.add_argument(
        "--results",
        help="the results JSON to re-score when OUTPUT_PATH holds several runs "
        "(default: the newest that is not itself a re-score)",
    )
    parser.add_argument(
        "--tasks", help="comma-separated subset of the run's tasks (a group stands for its tasks; default: all)"
    )
    parser.add_argument(
        "--judge", help=f"judge for this re-score: offline, llm or a registered judge name (sets {JUDGE_ENV})"
    )
    parser.add_argument("--judge-model", help=f"judge model (sets {JUDGE_MODEL_ENV})")
    parser.add_argument(
        "--strict",
        action="store_true",
        help=f"official-parity parsing where a benchmark has it "
        f"(the exact-string scores of the official code; sets {STRICT_ENV}=1)",
    )
    parser.add_argument(
        "--include_path",
        metavar="DIR",
        help="a task folder to index besides the installed benchmarks "
        "(a stored run's include_path is never used: give it here if you trust it)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="show lmms-eval's output as it runs")
    score_batch.add_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = list(argv)
    problem = score_batch.check_arguments(args)
    if problem:
        parser.error(problem)  # exit 2, nothing written

    remove_stale_scratch()
    try:
        original_path = find_results(args.output_path, args.results)
        original = read_results(original_path)
        tasks = run_tasks(original, args.tasks, original_path)
        stored_targets = check_logged_samples(original_path, tasks)
        config = original.get("config") or {}
        if not isinstance(config, Mapping):
            raise ScoreInputError(f"{original_path}: config is not an object: the results file was edited or damaged")
        include = include_options(config, original_path, args.include_path)
        forwarded_options(config, original_path)  # a tampered option is refused before anything runs
    except ScoreInputError as exc:
        emit(f"lmms-eval-plugins score: error: {exc}", file=sys.stderr)
        return 2
    try:
        with signals_unwind(), folder_lock(original_path.parent):
            return replay_and_install(args, original_path, original, config, tasks, include, stored_targets)
    except Interrupted as exc:
        emit(f"lmms-eval-plugins score: stopped by {exc}: lmms-eval ended, temporary files removed", file=sys.stderr)
        return 128 + exc.signum


def replay_and_install(
    args: argparse.Namespace,
    original_path: Path,
    original: Mapping[str, Any],
    config: Mapping[str, Any],
    tasks: list[str],
    include: list[str],
    stored_targets: Mapping[str, Mapping[int, str]] | None = None,
) -> int:
    env = dict(os.environ)
    if args.judge:
        env[JUDGE_ENV] = args.judge
    if args.judge_model:
        env[JUDGE_MODEL_ENV] = args.judge_model
    if args.strict:
        env[STRICT_ENV] = "1"
    if args.prices:
        env[score_batch.ENV_PRICES] = str(Path(args.prices).expanduser().resolve())
    emit(
        f"lmms-eval-plugins score: replaying {len(tasks)} task(s) of {original_path} through lmms-eval "
        f"(--model replay){'' if args.verbose else '; -v shows its output'}",
        file=sys.stderr,
    )
    with tempfile.TemporaryDirectory(prefix=SCRATCH_PREFIX) as scratch_name:
        scratch = Path(scratch_name)
        write_atomic(scratch / OWNER_FILE, f"{os.getpid()}\n")
        batch_run = None
        if args.batch or args.dry_run:  # a first replay finds the pending verdicts (score_batch.py)

            def replay(replay_env: dict[str, str], out: Path) -> tuple[int, str, Path | None]:
                code, text = run_replay(
                    replay_command(original_path, tasks, out, config, include), replay_env, scratch, args.verbose
                )
                found = sorted(out.rglob(f"*{RESULTS_SUFFIX}"))
                return code, _ANSI.sub("", text), found[-1] if found else None

            stop, batch_run = score_batch.prepare(args, args.argv, original_path, env, scratch, replay)
            if stop is not None:
                return stop
        command = replay_command(original_path, tasks, scratch / "out", config, include)
        returncode, output = run_replay(command, env, scratch, args.verbose)
        produced = sorted((scratch / "out").rglob(f"*{RESULTS_SUFFIX}"))
        if not produced:
            mismatch = replay_failure(output)
            if mismatch:
                emit(f"lmms-eval-plugins score: error: {mismatch}", file=sys.stderr)
                return 2
            tail = "\n".join(_ANSI.sub("", output).splitlines()[-40:])
            emit(
                f"{tail}\nlmms-eval-plugins score: lmms-eval wrote no results (exit status {returncode}); "
                "its output ends above; -v shows all of it",
                file=sys.stderr,
            )
            return 1
        new_path = produced[-1]
        new = read_results(new_path)
        try:
            reasons = check_same_run(original_path, original, new_path, new, tasks, stored_targets)
        except ScoreInputError as exc:
            emit(f"lmms-eval-plugins score: error: {exc}", file=sys.stderr)
            return 2
        mark_rescored(new, original, original_path, env)
        score_batch.merge_accounting(batch_run, new, scratch / "out" / "judge_report.json", env)
        try:
            target = install(new_path, new, scratch / "out", original_path.parent)
        except OSError as exc:
            emit(f"lmms-eval-plugins score: cannot put the new results beside the run: {exc}", file=sys.stderr)
            return 1
    emit(tables(output))
    status, lines = summary(original_path, target, tasks, new, reasons)
    if args.batch or args.prices:
        lines += score_batch.accounting_lines(new)
    emit("\n".join(lines))
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
