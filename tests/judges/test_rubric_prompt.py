"""The rubric judge sends the instructions its benchmark's spec declares (CrossVid: the official CCQA
prompt, lmms_eval_plugins.benchmarks.crossvid.ccqa), byte for byte as before the prompt moved there, so
a verdict cache filled before still hits."""

from __future__ import annotations

import hashlib
import sys
import types
from pathlib import Path

import pytest

import lmms_eval_plugins.judges as judges
from lmms_eval_plugins.benchmark import Benchmark
from lmms_eval_plugins.benchmarks.crossvid.ccqa import CCQA_JUDGE_PROMPT
from lmms_eval_plugins.benchmarks.crossvid.spec import BENCHMARK as CROSSVID
from lmms_eval_plugins.judges import JudgeItem, load_judge
from lmms_eval_plugins.judges import registry as reg
from lmms_eval_plugins.judges.base import JudgeConfigError
from lmms_eval_plugins.judges.cache import verdict_key
from lmms_eval_plugins.judges.rubric import RubricJudge

# Computed on main b5d320f, before the move (the prompt then lay in judges/prompts/rubric_system.txt):
# SHA-256 of the system message, and the verdict key of ITEM with the judge's default sampling.
MAIN_PROMPT_SHA256 = "b933b1d8fd6a1a891d8aa49d81729233686bb08c26baeacbb64b3dd76e56ab47"
MAIN_VERDICT_KEY = "080da8f90033fbed5d6d14dd917a975481ca9fe540b4e92970bfaafbec8d5aac"
ITEM = JudgeItem(
    question="Which video is longer?",
    prediction="Video 2 is longer, by 5 seconds.",
    reference="Video 2, by 5 s.",
    scoring_points=("names video 2", "says 5 seconds"),
)


def test_the_rubric_prompt_and_cache_key_are_those_of_main():
    judge = load_judge("rubric")
    messages = judge.build_messages(ITEM)
    assert messages[0] == {"role": "system", "content": CCQA_JUDGE_PROMPT}
    assert hashlib.sha256(CCQA_JUDGE_PROMPT.encode("utf-8")).hexdigest() == MAIN_PROMPT_SHA256
    key = verdict_key(
        judge=judge.name,
        version=judge.version,
        model="gpt-4.1",
        endpoint="http://127.0.0.1:8000/v1",
        messages=messages,
        sampling=judge.sampling,
    )
    assert key == MAIN_VERDICT_KEY


def test_crossvid_declares_the_prompt_and_judges_ships_no_ccqa_substance():
    assert CROSSVID.judge == "rubric" and CROSSVID.judge_prompt == CCQA_JUDGE_PROMPT
    assert not (Path(reg.__file__).parent / "prompts" / "rubric_system.txt").exists()
    for name in ("rubric_micro_average", "rubric_per_question_mean"):  # no re-export left behind
        assert not hasattr(judges, name)


def _spec(name: str, judge: str, prompt: str) -> Benchmark:
    return Benchmark(
        name=name,
        title=name,
        description="",
        tasks_dir=Path("nowhere"),
        metric_lists={},
        judge=judge,
        judge_prompt=prompt,
    )


def _load_spec(monkeypatch, module: str, spec: Benchmark) -> None:
    """As a task folder's utils.py does: its spec module is imported (an exported folder's has no entry point)."""
    monkeypatch.setitem(sys.modules, module, types.SimpleNamespace(BENCHMARK=spec))


def test_an_imported_spec_declares_the_prompt_without_entry_points(monkeypatch):
    monkeypatch.setattr("lmms_eval_plugins.benchmark.registry", lambda: {})
    _load_spec(monkeypatch, "vendored_bench.spec", _spec("vendored_bench", "points_test", "Score each point."))
    assert reg.declared_prompt("points_test") == "Score each point."
    assert RubricJudge(system_prompt="given").system_prompt == "given"  # passed in: no lookup


def test_no_prompt_or_two_prompts_is_a_named_config_error(monkeypatch):
    monkeypatch.setattr("lmms_eval_plugins.benchmark.registry", lambda: {})
    with pytest.raises(
        JudgeConfigError,
        match=r"no installed benchmark declares the instructions of the judge "
        r"'points_none'; fix: set judge='points_none' and judge_prompt=",
    ):
        reg.declared_prompt("points_none")
    _load_spec(monkeypatch, "bench_a.spec", _spec("bench_a", "points_two", "A"))
    _load_spec(monkeypatch, "bench_b.spec", _spec("bench_b", "points_two", "B"))
    with pytest.raises(JudgeConfigError, match="the benchmarks bench_a, bench_b declare different instructions"):
        reg.declared_prompt("points_two")
    _load_spec(monkeypatch, "bench_b.spec", _spec("bench_b", "points_two", "A"))  # the same text twice: fine
    assert reg.declared_prompt("points_two") == "A"
