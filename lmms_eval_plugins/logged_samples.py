"""lmms-eval's logged samples: where a run's ``*_samples_<task>.jsonl`` files are, and reading them.

With ``--log_samples`` lmms-eval 0.7.3 writes, beside ``<stem>_results.json``, one
``<stem>_samples_<task>.jsonl`` per task: one JSON object per document (``doc_id``, ``target``,
``resps``/``filtered_resps``, the metrics' per-document items...), appended line by line, with
``ensure_ascii=False`` (see ``lmms_eval/loggers/evaluation_tracker.py``). Every reader of those files
(``--model replay``, ``score``, ``report``/``compare``, ``check-model``, the CLI runner, ViRectify's
hints) goes through this module, so they agree on the file names and on what a malformed file is:
a :class:`~lmms_eval_plugins.errors.DataError` naming the file and the line (a torn last line from an
interrupted run included; each caller decides what that costs).
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import read_jsonl

RESULTS_SUFFIX = "_results.json"


def results_stem(results_path: Path) -> str:
    """``<stem>`` of ``<stem>_results.json`` (the file's stem for any other name)."""
    name = results_path.name
    return name[: -len(RESULTS_SUFFIX)] if name.endswith(RESULTS_SUFFIX) else results_path.stem


def samples_path(results_path: Path, task: str) -> Path:
    """Where lmms-eval wrote ``task``'s logged samples for this results file (it may not exist)."""
    return results_path.with_name(f"{results_stem(results_path)}_samples_{task}.jsonl")


def samples_files(results_path: Path) -> list[Path]:
    """Every task's logged samples file beside this results file, sorted by name."""
    return sorted(results_path.parent.glob(f"{glob.escape(results_stem(results_path))}_samples_*.jsonl"))


def read_samples(path: Path) -> list[dict[str, Any]]:
    """The logged samples of one file, in file order (blank lines skipped).

    A file that cannot be read, a line that is not JSON (a torn last line too) or not an object is a
    :class:`~lmms_eval_plugins.errors.DataError` whose ``problem`` starts with ``line N:`` for a bad line.
    """
    return read_jsonl(Path(path))
