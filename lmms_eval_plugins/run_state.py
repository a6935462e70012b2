"""What one evaluation run owns outside judging: its options (strict scoring) and the media that
failed to decode at request time.

lmms-eval gives a task's hooks no handle on the run that calls them, so the run's :class:`RunState` is
the *current* one: compat entry ``simple_evaluate`` starts a fresh state for every run
(:func:`begin_run`, beside the judge session of ``judges/session.py``), the media loader notes a file
it could not decode there (with skipping on, the model got a placeholder), and ``process_results``
reads it back (:func:`lmms_eval_plugins.outcome.unreadable_media_of`). A doc's visuals are loaded and
its results processed in the same process (lmms-eval's ranks are processes: each has its own state).
Outside a run (library calls, tests) the first use starts one.

``strict`` (official-parity scoring, what ``lmms-eval-plugins score --strict`` asks for) is decided once,
when the run starts, from the run's configuration: the replay model's ``strict=true`` model arg, or
``LMMS_EVAL_PLUGINS_STRICT=1`` in the run's environment. The results JSON records it
(``lmms_eval_plugins_options``); loaders stamp it on the docs, so ``process_results`` gets it as part of
its arguments. Outside a run the environment is read when asked.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from typing import Any


def normalised_path(path: Any) -> str:
    """``path`` as text, ``~`` expanded and normalised (how a noted file and a doc's field are compared)."""
    text = str(path).strip()
    return os.path.normpath(os.path.expanduser(text)) if text else text


# The results JSON's key for the run's 95% intervals: task -> "metric,filter" -> [low, high] (percentile bootstrap)
INTERVALS_KEY = "lmms_eval_plugins_intervals"


class RunState:
    """One run's options and notes. ``strict``: None when no run decided it (outside a run);
    unreadable media: {media path, as the doc names it and normalised: record ids (None: any)}."""

    def __init__(self, *, strict: bool | None = None) -> None:
        self.strict = strict
        self._unreadable: dict[str, set[str | None]] = {}
        self._intervals: dict[str, dict[str, list[float]]] = {}
        self._lock = threading.Lock()  # noted from the model's loader threads, read from process_results'

    def note_unreadable_media(self, path: Any, record_id: str | None) -> None:
        """Remember that ``path`` (as the doc names it) could not be decoded for ``record_id``."""
        record = None if record_id is None else str(record_id)
        with self._lock:
            for key in {str(path), normalised_path(path)}:  # as given, and normalised
                self._unreadable.setdefault(key, set()).add(record)

    def options(self) -> dict[str, Any]:
        """What the results JSON records of this run's options."""
        return {"strict": strict_mode(self)}

    def note_intervals(self, task: str, intervals: Mapping[str, list[float]]) -> None:
        """Keep a task's 95% intervals ("metric,filter" -> [low, high]) for the results file."""
        with self._lock:
            self._intervals.setdefault(task, {}).update(intervals)

    def intervals(self) -> dict[str, dict[str, list[float]]]:
        """What the results JSON records of the run's 95% intervals: task -> "metric,filter" -> [low, high]."""
        with self._lock:
            return {task: dict(found) for task, found in self._intervals.items()}

    def unreadable_media(self) -> Mapping[str, frozenset[str | None]]:
        """A snapshot of the notes (empty when every file decoded)."""
        with self._lock:
            return {path: frozenset(records) for path, records in self._unreadable.items()}


class _Current:
    """The state of the run in progress (one per process: lmms-eval runs one evaluation at a time)."""

    def __init__(self) -> None:
        self.state: RunState | None = None
        self.lock = threading.Lock()


_current = _Current()


def current_run() -> RunState:
    """The state of the run in progress; outside a run, one started on first use."""
    with _current.lock:
        if _current.state is None:
            _current.state = RunState()
        return _current.state


def begin_run(*, strict: bool = False) -> RunState:
    """A fresh state for the run that starts now (the previous run's notes are dropped)."""
    with _current.lock:
        _current.state = RunState(strict=strict)
        return _current.state


def strict_mode(state: RunState | None = None) -> bool:
    """Whether this run scores in strict (official-parity) mode; outside a run, what the environment says."""
    from lmms_eval_plugins.doc_fields import strict_requested

    state = current_run() if state is None else state
    return strict_requested() if state.strict is None else state.strict


def strict_from_run_config(model_args: Any, env: Mapping[str, str] | None = None) -> bool:
    """The strict option of a run that starts now: ``strict=true`` among its model args (the replay model
    takes it) or ``LMMS_EVAL_PLUGINS_STRICT=1``."""
    from lmms_eval_plugins.doc_fields import strict_requested, truthy

    if isinstance(model_args, Mapping):
        value = model_args.get("strict")
    else:
        pairs = (part.partition("=") for part in str(model_args or "").split(","))
        value = next((v for k, _, v in pairs if k.strip() == "strict"), None)
    return truthy(value) or strict_requested(env)
