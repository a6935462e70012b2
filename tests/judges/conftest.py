"""Fixtures for the judge tests: a clean judge environment, a loopback judge server, fast retries."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/ (judge_server.py)

from judge_server import TEST_API_KEY, JudgeServer
from lmms_eval_plugins.judges.runtime import RuntimeSettings
from lmms_eval_plugins.judges.session import reset_runtimes

API_KEY = TEST_API_KEY

_JUDGE_VARS = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_URL", "OPENAI_API_BASE")


@pytest.fixture(autouse=True)
def judge_env(monkeypatch, tmp_path):
    """No endpoint, no judge variables, a private cache and report location, fast retries."""
    for name in list(os.environ):
        if name in _JUDGE_VARS or name.startswith("LMMS_EVAL_PLUGINS_JUDGE"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("RANK", raising=False)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE", str(tmp_path / "cache" / "judge_cache.sqlite3"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET", str(tmp_path / "secret" / "judge_cache.secret"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_RETRY_BASE", "0.01")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_RETRY_MAX", "0.05")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT", "0.5")
    reset_runtimes()
    yield tmp_path
    reset_runtimes()


@pytest.fixture
def server():
    with JudgeServer(lifetime=60) as srv:
        yield srv


@pytest.fixture
def endpoint_env(monkeypatch, server):
    """Point the judge at the loopback server through the documented variables."""
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    return server


@pytest.fixture
def fast():
    return RuntimeSettings(
        concurrency=8, timeout=0.5, max_attempts=6, retry_base=0.01, retry_max=0.05, max_retry_after=1.0
    )
