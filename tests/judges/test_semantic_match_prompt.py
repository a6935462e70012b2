"""The semantic_match judge sends the instructions its benchmark's spec declares (ViRectify: the paper's
Table 5 prompt and our data paragraph, lmms_eval_plugins.benchmarks.virectify.judge_prompt), byte for byte
as before the prompt moved there from judges/prompts/, so a verdict cache filled before still hits."""

from __future__ import annotations

import hashlib
from pathlib import Path

from lmms_eval_plugins.judges import JudgeItem, load_judge
from lmms_eval_plugins.judges import registry as reg
from lmms_eval_plugins.judges.cache import verdict_key
from lmms_eval_plugins.judges.semantic_match import SemanticMatchJudge

from lmms_eval_plugins.benchmarks.virectify.judge_prompt import ACC_R_JUDGE_PROMPT
from lmms_eval_plugins.benchmarks.virectify.spec import BENCHMARK as VIRECTIFY

# Computed on main faa6668, before the move (the prompt then lay in judges/prompts/semantic_match_system.txt,
# sent without its leading '#' comment lines): SHA-256 of the system message, and the verdict key of
# ITEM with the judge's default sampling.
MAIN_PROMPT_SHA256 = "3298eb2beb0f9d058fe3673817208fa58b9fce1d4aa87e3f0f9388f1369fa2df"
MAIN_VERDICT_KEY = "bdbad59c02ccd70366f07dbe02dfb1f3f1bb7cf6f91e3776189e2f6aca36bed2"
ITEM = JudgeItem(
    question="How many cups are on the table at the end?", prediction="There are three cups.", reference="3 cups"
)


def test_the_semantic_match_prompt_and_cache_key_are_those_of_main():
    judge = load_judge("semantic_match")
    messages = judge.build_messages(ITEM)
    assert messages[0] == {"role": "system", "content": ACC_R_JUDGE_PROMPT}
    assert hashlib.sha256(ACC_R_JUDGE_PROMPT.encode("utf-8")).hexdigest() == MAIN_PROMPT_SHA256
    key = verdict_key(
        judge=judge.name,
        version=judge.version,
        model="gpt-4.1",
        endpoint="http://127.0.0.1:8000/v1",
        messages=messages,
        sampling=judge.sampling,
    )
    assert key == MAIN_VERDICT_KEY


def test_virectify_declares_the_prompt_and_judges_ships_no_prompt_file():
    assert VIRECTIFY.judge == "semantic_match" and VIRECTIFY.judge_prompt == ACC_R_JUDGE_PROMPT
    assert reg.declared_prompt("semantic_match") == ACC_R_JUDGE_PROMPT
    assert ACC_R_JUDGE_PROMPT.startswith("You are a strict answer evaluator.")  # no source comment is sent
    assert not (Path(reg.__file__).parent / "prompts").exists()


def test_an_explicit_system_prompt_is_sent_without_a_lookup(monkeypatch):
    def no_lookup(judge: str) -> str:
        raise AssertionError(f"declared_prompt({judge!r}) was called")

    monkeypatch.setattr("lmms_eval_plugins.judges.semantic_match.declared_prompt", no_lookup)
    judge = SemanticMatchJudge(sampling={"max_tokens": 4}, system_prompt="Reply 1 or 0.")
    assert judge.build_messages(ITEM)[0] == {"role": "system", "content": "Reply 1 or 0."}
    assert judge.sampling == {"temperature": 0.0, "max_tokens": 4}
