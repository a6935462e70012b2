"""Judging state belongs to the run (judges/session.py): each run gets a fresh session with its own
runtimes, --predict_only comes from the run's arguments (never sys.argv), and no judge module rebinds
a global."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from lmms_eval_plugins.judges import session as sessions

JUDGES = Path(sessions.__file__).resolve().parent


def test_each_run_gets_a_fresh_session_with_its_own_runtimes(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["lmms-eval", "--predict_only"])  # ignored: the run says what it is
    first = sessions.begin_run(deferred=False)
    assert not sessions.judging_deferred()
    runtime = sessions.get_runtime(tmp_path / "cache.sqlite3")
    assert sessions.get_runtime(tmp_path / "cache.sqlite3") is runtime  # one runtime per cache in a run
    second = sessions.begin_run(deferred=True)
    try:
        assert second is not first and sessions.current_session() is second and sessions.judging_deferred()
        assert sessions.get_runtime(tmp_path / "cache.sqlite3") is not runtime
        assert first.runtimes() == []  # the previous run's runtimes were closed with it
    finally:
        sessions.end_session()


def test_no_judge_module_rebinds_a_global():
    for path in sorted(JUDGES.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Global)], path.name


def test_a_judge_is_announced_once_per_run():
    from lmms_eval_plugins.judges.session import announce_judge, announce_unavailable

    sessions.begin_run(deferred=False)
    try:
        assert announce_judge("rubric", "1", None, None) is True
        assert announce_judge("rubric", "1", None, None) is False  # filters are built more than once
        assert announce_unavailable("rubric", "no endpoint") is True
        assert announce_unavailable("rubric", "no endpoint") is False
        sessions.begin_run(deferred=False)  # the next run in this process says it again
        assert announce_judge("rubric", "1", None, None) is True
        assert announce_unavailable("rubric", "no endpoint") is True
    finally:
        sessions.end_session()
