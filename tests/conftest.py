"""Shared fixtures: the tiny Qwen2.5-VL, and running the real lmms-eval CLI."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _private_frame_cache(tmp_path_factory):
    """CLI runs (subprocesses inherit the environment) share one frame cache of the session, never the user's."""
    previous = os.environ.get("LMMS_EVAL_PLUGINS_FRAME_CACHE")
    os.environ["LMMS_EVAL_PLUGINS_FRAME_CACHE"] = str(tmp_path_factory.mktemp("frame-cache"))
    # the judge cache's signing secret too (judges/cache.py): never the user's
    os.environ["LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET"] = str(
        tmp_path_factory.mktemp("judge-secret") / "judge_cache.secret"
    )
    yield
    if previous is None:
        os.environ.pop("LMMS_EVAL_PLUGINS_FRAME_CACHE", None)
    else:
        os.environ["LMMS_EVAL_PLUGINS_FRAME_CACHE"] = previous


@pytest.fixture(autouse=True)
def _outside_a_run(monkeypatch):
    """Each test starts outside a run: a run state begun by an earlier test (its options, its notes) is not
    this test's (lmms_eval_plugins/run_state.py)."""
    from lmms_eval_plugins import run_state

    monkeypatch.setattr(run_state, "_current", run_state._Current())


@pytest.fixture(scope="session")
def tiny_qwen_dir(tmp_path_factory) -> Path:
    from lmms_eval_plugins.tiny_qwen import build_tiny_qwen2_5_vl

    # Reuse one build across the session (and across runs when LMMS_EVAL_PLUGINS_TEST_CACHE is set).
    base = os.environ.get("LMMS_EVAL_PLUGINS_TEST_CACHE")
    folder = Path(base) / "tiny-qwen" if base else tmp_path_factory.mktemp("tiny-qwen")
    return build_tiny_qwen2_5_vl(folder)


@pytest.fixture(scope="session")
def tiny_qwen_args(tiny_qwen_dir) -> str:
    from lmms_eval_plugins.tiny_qwen import lmms_eval_model_args

    return lmms_eval_model_args(tiny_qwen_dir)


@pytest.fixture()
def isolated_env(tmp_path, monkeypatch) -> Path:
    """A private cache folder so tests never read or write the user's caches."""
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CACHE", str(tmp_path / "cache" / "judge.sqlite3"))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-datasets"))
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT", raising=False)
    return tmp_path
