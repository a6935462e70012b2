"""The judging state of one run: a runtime per verdict cache, and whether judging is deferred.

lmms-eval gives a task's filters and hooks no handle on the run that builds them, so the run's
:class:`JudgeSession` is the *current* one: compat entry ``simple_evaluate`` starts a fresh session for
every run (:func:`begin_run`, with ``--predict_only`` read from the run's own arguments and the run's
output folder handed in by the compat layer; nothing here reads ``sys.argv``), judge filters take their
runtime from it, and the results hook reads its accounting.
Outside a run (``judge-agreement``, library calls, tests) the first use starts one.
"""

from __future__ import annotations

import atexit
import json
import os
import threading
from pathlib import Path
from typing import Any

from loguru import logger

from .cache import default_cache_path
from .endpoint import Endpoint, announcement
from .runtime import JudgeRuntime


class JudgeSession:
    """What one run's judging owns. ``deferred``: the run is ``--predict_only``, so judge filters make
    no calls and need no endpoint (``lmms-eval-plugins score`` judges later)."""

    def __init__(self, *, deferred: bool = False, output_path: str | None = None) -> None:
        self.deferred = bool(deferred)
        self.output_path = output_path  # the run's --output_path: its judge reports go there
        self._runtimes: dict[Path, JudgeRuntime] = {}
        self._said: set[tuple[Any, ...]] = set()  # the announcements logged (judges/endpoint.py)
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def runtime(self, cache_path: str | os.PathLike[str] | None = None) -> JudgeRuntime:
        """This run's runtime for a verdict cache (default: ``$LMMS_EVAL_PLUGINS_JUDGE_CACHE`` or
        ``~/.cache/lmms_eval_plugins/judge_cache.sqlite3``)."""
        path = Path(cache_path).expanduser() if cache_path is not None else default_cache_path()
        path = path.resolve() if path.parent.exists() else path.absolute()
        with self._lock:
            if self._pid != os.getpid():  # forked: start fresh (connections do not survive a fork)
                self._runtimes.clear()
                self._pid = os.getpid()
            runtime = self._runtimes.get(path)
            if runtime is None:
                runtime = self._runtimes[path] = JudgeRuntime(path, output_path=self.output_path)
            return runtime

    def first_time(self, key: tuple[Any, ...]) -> bool:
        """True the first time this run says ``key``: an announcement is logged once per run, however
        often lmms-eval builds a task's filters."""
        with self._lock:
            if key in self._said:
                return False
            self._said.add(key)
            return True

    def forget_said(self) -> None:
        with self._lock:
            self._said.clear()

    def runtimes(self) -> list[JudgeRuntime]:
        with self._lock:
            return list(self._runtimes.values())

    def accounting_reports(self) -> list[dict[str, Any]]:
        """This run's judge accounting (one entry per verdict cache used), redacted, for its results JSON."""
        reports = []
        for runtime in self.runtimes():
            report = runtime.report()
            if report.get("by_judge"):
                reports.append(json.loads(runtime.redact(json.dumps(report, sort_keys=True))))
        return reports

    def summarize(self) -> None:
        """Log each active runtime's accounting and write the reports its filters asked for."""
        for runtime in self.runtimes():
            if runtime.accounting.active:
                try:
                    logger.info(runtime.summary())
                    for requested in sorted(runtime.report_requests(), key=str):
                        logger.info(f"judge accounting written to {runtime.write_report(requested)}")
                except Exception:  # a summary must never turn a finished run into a failure
                    pass

    def close(self) -> None:
        with self._lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        for runtime in runtimes:
            runtime.cache.close()


class _Current:
    """The session of the run in progress (one per process: lmms-eval runs one evaluation at a time)."""

    def __init__(self) -> None:
        self.session: JudgeSession | None = None
        self.lock = threading.Lock()


_current = _Current()


def current_session() -> JudgeSession:
    with _current.lock:
        if _current.session is None:
            _current.session = JudgeSession()
        return _current.session


def begin_run(*, deferred: bool, output_path: str | None = None) -> JudgeSession:
    """A fresh session for the run that starts now (``output_path``: its ``--output_path``, where its judge
    reports go); the previous run's is summarized and closed."""
    with _current.lock:
        previous, _current.session = _current.session, JudgeSession(deferred=deferred, output_path=output_path)
        session = _current.session
    if previous is not None:
        previous.summarize()
        previous.close()
    return session


def end_session() -> None:
    """Close the current session, its announcements with it (tests)."""
    with _current.lock:
        previous, _current.session = _current.session, None
    if previous is not None:
        previous.close()


# The names judge filters, commands and tests use.
def get_runtime(cache_path: str | os.PathLike[str] | None = None) -> JudgeRuntime:
    return current_session().runtime(cache_path)


def judging_deferred() -> bool:
    return current_session().deferred


def set_judging_deferred(deferred: bool) -> None:
    current_session().deferred = bool(deferred)


def accounting_reports() -> list[dict[str, Any]]:
    return current_session().accounting_reports()


reset_runtimes = end_session


# What a run says once, however often lmms-eval builds a task's filters (and several tasks share a judge).
def announce_judge(judge_name: str, version: str | None, model: str | None, endpoint: Endpoint | None) -> bool:
    """Log :func:`~.endpoint.announcement` once per run (and process) per judge, model and endpoint;
    True if it was logged."""
    key = (
        os.getpid(),
        judge_name,
        version,
        model,
        endpoint.host if endpoint else None,
        endpoint.source if endpoint else None,
    )
    if not current_session().first_time(key):
        return False
    logger.info(announcement(judge_name, version, model, endpoint))
    return True


def announce_unavailable(judge_name: str, problem: str) -> bool:
    """Log once per run (and process) why a judge cannot judge in this run; True if it was logged."""
    if not current_session().first_time((os.getpid(), "unavailable", judge_name, problem)):
        return False
    logger.error(
        f"judge for {judge_name!r} is not available: {problem}\nThe model still runs; the judged metrics of "
        "its tasks will be null (unscored) until `lmms-eval-plugins score OUTPUT_PATH` is run with a judge configured."
    )
    return True


def forget_announcements() -> None:
    """Forget which judges this run announced (tests; a new run's session starts with none)."""
    current_session().forget_said()


@atexit.register
def _final_summary() -> None:  # pragma: no cover - exercised in real runs
    session = _current.session
    if session is not None:
        session.summarize()
