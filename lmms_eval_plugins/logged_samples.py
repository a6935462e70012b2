"""lmms-eval's logged samples: reading a run's ``*_samples_<task>.jsonl`` files (where they are: :mod:`lmms_eval_plugins.runs`).

With ``--log_samples`` lmms-eval 0.7.3 writes, beside ``<stem>_results.json``, one
``<stem>_samples_<task>.jsonl`` per task: one JSON object per document (``doc_id``, ``target``,
``resps``/``filtered_resps``, the metrics' per-document items...), appended line by line, with
``ensure_ascii=False`` (see ``lmms_eval/loggers/evaluation_tracker.py``). Every reader of those files
(``--model replay``, ``score``, ``report``/``compare``, ``check-model``, the CLI runner, ViRectify's
hints) goes through this module (and :mod:`lmms_eval_plugins.runs` for the file names), so they agree on what a malformed file is:
a :class:`~lmms_eval_plugins.errors.DataError` naming the file and the line (a torn last line from an
interrupted run included; each caller decides what that costs), and a doc_id logged twice is a
:class:`DuplicateDocError` (lmms-eval logs one line per document: a second one was appended or edited in).

A task name read from a results JSON is data: :func:`check_task_name` keeps it a plain name (no path,
no wildcard, no list), so it can neither name a file outside the run folder nor, passed to
``lmms-eval --tasks``, a task YAML to load.
"""

from __future__ import annotations

import glob
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import iter_jsonl, parse_json
from lmms_eval_plugins.errors import DataError, PluginError

# lmms-eval's task names (all of 0.7.3's match); 200 leaves room for "<stem>_samples_" in a 255-byte name
TASK_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+\-]{0,199}")


class UnusableDocError(DataError):
    """A samples line whose ``doc_id`` cannot identify a document (refused by score, compare and replay)."""


class DuplicateDocError(UnusableDocError):
    """A samples file logs one doc_id on two lines."""


def check_task_name(task: Any, *, path: Path, field: str = "results") -> str:
    """``task`` when it is a plain task name, else a DataError naming the file and the field."""
    if isinstance(task, str) and TASK_NAME.fullmatch(task):
        return task
    raise DataError(
        f"{field}: task name {str(task)[:80]!r} is not a task name (letters, digits, '_', '-', '.', '+'; "
        "at most 200; no '/', ',' or '*')",
        path=str(path),
        fix="the results file was edited or damaged: use the file lmms-eval wrote",
    )


def check_task_names(data: dict[str, Any], path: Path) -> None:
    """Every task and group name in a results JSON (``results``, ``configs``, ``group_subtasks``) is plain."""
    for field in ("results", "configs", "group_subtasks"):
        section = data.get(field)
        for name, value in section.items() if isinstance(section, dict) else ():
            check_task_name(name, path=path, field=field)
            for member in value if field == "group_subtasks" and isinstance(value, list) else ():
                check_task_name(member, path=path, field=f"group_subtasks[{name!r}]")


# ------------------------------------------------------------------------------------ file names

RESULTS_SUFFIX = "_results.json"


def results_stem(results_path: Path) -> str:
    """``<stem>`` of ``<stem>_results.json`` (the file's stem for any other name)."""
    name = results_path.name
    return name[: -len(RESULTS_SUFFIX)] if name.endswith(RESULTS_SUFFIX) else results_path.stem


def samples_path(results_path: Path, task: str) -> Path:
    """Where lmms-eval wrote ``task``'s logged samples for this results file (it may not exist); a task
    name that is not a plain name is a DataError (see :func:`logged_samples.check_task_name`)."""
    check_task_name(task, path=results_path)
    return results_path.with_name(f"{results_stem(results_path)}_samples_{task}.jsonl")


def samples_files(results_path: Path) -> list[Path]:
    """Every task's logged samples file beside this results file, sorted by name."""
    return sorted(results_path.parent.glob(f"{glob.escape(results_stem(results_path))}_samples_*.jsonl"))


# What a reader of scores needs never includes these: the document, the prompt and the replies.
BULKY = ("doc", "arguments", "resps", "filtered_resps")


# How the plugin's tasks log their items (issue 41). lmms-eval logs what ``process_results`` returns
# under each metric's name, and our metrics share one item per sample: lmms-eval wrote it up to 23 times
# a line. The plugin's samples writer (``compat.patches``) keeps the first metric's item and leaves out
# every later metric whose item is equal to it; a metric with its own value keeps it. So each item is
# logged once, and a reader finds a metric's item under its name, else as the line's first item
# (:func:`item_of`). Lines written before (every metric named) read the same.


def without_repeated_items(record: dict[str, Any], metrics: Any) -> dict[str, Any]:
    """``record`` without the items of ``metrics`` equal to the first of them (the line as written)."""
    out: dict[str, Any] = {}
    first: Any = None
    for key, value in record.items():
        if key in metrics and isinstance(value, dict):
            if first is None:
                first = value
            elif value == first:
                continue
        out[key] = value
    return out


def reply_parts(stored: Any) -> tuple[str | None, dict[str, Any] | None]:
    """(the model's reply, the attachment it came in) of one request's logged value; (None, None) when
    there is no reply.

    A list is a filter's output (or lmms-eval's list of generations): its first element is the reply
    (``[text, attachment]`` from our replay filter). Only inside such a list is a JSON object text an
    attachment (our judge's ``{"text": reply, "judge": ...}``): a bare string is the reply itself, even
    when the model answered with JSON.
    """
    value, in_list = stored, False
    while isinstance(value, list) and value:
        value, in_list = value[0], True
    if in_list and isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            decoded = parse_json(value)
        except ValueError:  # not JSON, or beyond the reader's bounds: the reply itself
            decoded = None
        if isinstance(decoded, dict) and "text" in decoded:
            value = decoded
    attachment = value if isinstance(value, dict) else None
    if attachment is not None:
        value = attachment.get("text")
    return (value if isinstance(value, str) else None), attachment


def reply_text(stored: Any) -> str | None:
    """The model's reply in one request's logged value (:func:`reply_parts`), or None."""
    return reply_parts(stored)[0]


def logged_reply(sample: Mapping[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    """:func:`reply_parts` of a samples line's first request (``resps`` when kept, else ``filtered_resps``)."""
    return reply_parts(sample["resps"] if "resps" in sample else sample.get("filtered_resps"))


def first_item(record: Any) -> dict[str, Any] | None:
    """The first item a samples line holds (an object outside :data:`BULKY`), else None."""
    for name, value in record.items():
        if isinstance(value, dict) and name not in BULKY:
            return value
    return None


def item_of(record: Any, metric: str) -> Any:
    """``metric``'s per-sample item in a logged line: under its name, else the line's first item."""
    return record[metric] if metric in record else first_item(record)


def with_every_item(record: dict[str, Any], metrics: Any) -> dict[str, Any]:
    """``record`` with each of ``metrics`` under its own name again (as lmms-eval held it in memory)."""
    shared = first_item(record)
    if shared is None:
        return record
    return {**record, **{m: shared for m in metrics if m not in record}}


def lean(record: dict[str, Any]) -> dict[str, Any]:
    """A samples line as the scores' readers (``report``, ``compare``) need it, each item held once.

    - :data:`BULKY` (the document, prompt and replies) is dropped.
    - lmms-eval logs the task's item under every metric name (up to 23 copies a line): a metric value
      equal to the first item of the line is dropped, so a reader finds it as the line's first item
      (``compare._item``, ``runs.items_of``); a metric logged with a different value keeps it.
    - Keys and short strings are interned: a million items share one copy of each field name.
    """
    kept = {key: value for key, value in record.items() if key not in BULKY}
    # every object of the line is a metric's item here (what the writer does with the task's metric names)
    once = without_repeated_items(kept, frozenset(k for k, v in kept.items() if isinstance(v, dict)))
    return {
        sys.intern(key): {sys.intern(k): _interned(v) for k, v in value.items()} if isinstance(value, dict) else value
        for key, value in once.items()
    }


def _interned(value: Any) -> Any:
    return sys.intern(value) if isinstance(value, str) and len(value) <= 64 else value


def read_samples(path: Path, *, lean_records: bool = False) -> list[dict[str, Any]]:
    """The logged samples of one file, in file order (blank lines skipped), read in one streamed pass;
    with ``lean_records``, each as :func:`lean` keeps it. Errors as :func:`iter_samples` raises them."""
    return list(iter_samples(path, lean_records=lean_records))


def iter_samples(path: Path, *, lean_records: bool = False) -> Iterator[dict[str, Any]]:
    """The logged samples of one file, one at a time (a reader keeps only what it needs of each).

    A file that cannot be read, a line that is not JSON (a torn last line too) or not an object is a
    :class:`~lmms_eval_plugins.errors.DataError` whose ``problem`` starts with ``line N:`` for a bad line;
    a ``doc_id`` on a second line is a :class:`DuplicateDocError` naming both lines.
    """
    path = Path(path)
    first_line: dict[Any, int] = {}
    for number, record in iter_jsonl(path):
        doc_id = record.get("doc_id")
        if doc_id is not None and (isinstance(doc_id, bool) or not isinstance(doc_id, (int, str))):
            raise UnusableDocError(
                f"line {number}: doc_id is a JSON {type(doc_id).__name__}, not a number or a string",
                record=repr(doc_id)[:80],
                path=str(path),
                fix="lmms-eval logs each document's index as doc_id: use the file lmms-eval wrote",
            )
        key = (type(doc_id).__name__, repr(doc_id))  # 1 and "1" are different doc_ids; keys must hash
        if doc_id is not None and key in first_line:
            raise DuplicateDocError(
                f"line {number}: doc_id {doc_id!r} is logged twice (lines {first_line[key]} and {number})",
                record=repr(doc_id),
                path=str(path),
                fix="lmms-eval logs one line per document: the file was edited or two files were "
                "joined; use the file lmms-eval wrote (or re-run with --log_samples)",
            )
        first_line.setdefault(key, number)
        yield lean(record) if lean_records else record


#: starts every ReplayError message; ``lmms-eval-plugins score`` finds it in lmms-eval's output
REPLAY_ERROR_MARK = "lmms-eval-plugins replay:"


class ReplayError(PluginError):
    """The stored samples cannot answer a request (missing, malformed, or made for other documents)."""

    def __init__(self, message: str) -> None:
        self.detail = message
        super().__init__(f"{REPLAY_ERROR_MARK} {message}")


def load_samples(results_path: Path, task: str, keep: Callable[[dict[str, Any]], Any] | None = None) -> dict[int, Any]:
    """The logged samples of ``task`` by doc id (``keep``: only what it returns of each, read in one
    streamed pass); a missing or malformed file raises :class:`ReplayError`."""
    path = samples_path(results_path, task)
    if not path.is_file():
        raise ReplayError(
            f"no logged samples for task {task!r}: {path} does not exist. "
            "The run must be made with --log_samples; re-run lmms-eval with it"
        )
    by_doc: dict[int, Any] = {}
    try:
        for number, record in enumerate(iter_samples(path), start=1):
            if not isinstance(record.get("doc_id"), int):
                raise ReplayError(f"{path}: record {number} has no integer doc_id: not an lmms-eval samples file")
            by_doc[record["doc_id"]] = record if keep is None else keep(record)
    except UnusableDocError as exc:
        raise ReplayError(f"{path}: {exc.problem}: {exc.fix}") from exc
    except DataError as exc:
        raise ReplayError(
            f"{path}: {exc.problem}: the file is cut short or corrupt (an interrupted run?); "
            f"re-run lmms-eval for task {task!r} with --log_samples"
        ) from exc
    return by_doc
