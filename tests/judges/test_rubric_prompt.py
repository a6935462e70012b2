"""The rubric judge sends the instructions its benchmark's spec declares (CrossVid: the official CCQA
prompt, lmms_eval_plugins.benchmarks.crossvid.ccqa), byte for byte as before the prompt moved there, so
a verdict cache filled before still hits."""

from __future__ import annotations

import hashlib
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


def _installed(monkeypatch, *specs: Benchmark) -> None:
    """The installed benchmarks (their entry points) are ``specs``."""
    monkeypatch.setattr("lmms_eval_plugins.benchmark.registry", lambda: {spec.name: spec for spec in specs})


def test_a_task_tells_its_judge_the_prompt_without_entry_points_or_a_search(monkeypatch):
    # issue 38: the filter a benchmark's hooks bind is told its spec's prompt (an exported task folder
    # has no entry points, and nothing searches the imported modules for a spec any more)
    from lmms_eval_plugins.benchmarks.crossvid import tasks

    _installed(monkeypatch)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE", "llm")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    told = tasks.JudgeFilter(judge="rubric", default_model="gpt-4.1")
    assert told.unavailable is None, told.unavailable
    assert told.judge.build_messages(ITEM)[0] == {"role": "system", "content": CCQA_JUDGE_PROMPT}
    assert RubricJudge(system_prompt="given").system_prompt == "given"  # passed in: no lookup
    untold = RubricJudge()  # built (a batch ingest only reads replies) without a prompt to look up
    with pytest.raises(JudgeConfigError, match="no installed benchmark declares the instructions"):
        untold.build_messages(ITEM)
    assert "sys.modules" not in Path(reg.__file__).read_text(encoding="utf-8")


def test_no_prompt_or_two_prompts_is_a_named_config_error(monkeypatch):
    _installed(monkeypatch)
    with pytest.raises(
        JudgeConfigError,
        match=r"no installed benchmark declares the instructions of the judge "
        r"'points_none'; fix: set judge='points_none' and judge_prompt=",
    ):
        reg.declared_prompt("points_none")
    _installed(monkeypatch, _spec("bench_a", "points_two", "A"), _spec("bench_b", "points_two", "B"))
    with pytest.raises(JudgeConfigError, match="the benchmarks bench_a, bench_b declare different instructions"):
        reg.declared_prompt("points_two")
    _installed(monkeypatch, _spec("bench_a", "points_two", "A"), _spec("bench_b", "points_two", "A"))
    assert reg.declared_prompt("points_two") == "A"  # the same text twice: fine
    _installed(monkeypatch, _spec("vendored_bench", "points_test", "Score each point."))
    assert reg.declared_prompt("points_test") == "Score each point."
