"""JudgeFilter through lmms-eval's own filter machinery (YAML loading, build_filter_ensemble, Instances)."""

from __future__ import annotations

import copy
import json
import pickle
import textwrap

import pytest
from judge_server import TEST_API_KEY as API_KEY
from judge_server import server_error
from lmms_eval.api.instance import Instance
from lmms_eval.filters import build_filter_ensemble
from lmms_eval.utils import load_yaml_config
from lmms_eval_plugins.judges import (
    JudgeConfigError,
    JudgeErrorRateExceeded,
    JudgeFilter,
    JudgeItem,
    aggregate_judged,
    check_error_rate,
    judged_mean,
    judged_parts,
)


DOCS = [{"question": f"Question {i}?", "answer": "A" if i % 2 else "B"} for i in range(8)]


def item_fn(response: str, doc: dict) -> JudgeItem | None:
    if response == "NO ANSWER":
        return None
    if response == "BOOM":
        raise KeyError("answer")
    return JudgeItem(question=doc["question"], prediction=response, reference=doc["answer"])


def instances(doc_ids, resps):
    out = []
    for doc_id, resp in zip(doc_ids, resps):
        inst = Instance(
            request_type="generate_until",
            arguments=("ctx", {}),
            idx=0,
            metadata={"task": "t", "doc_id": doc_id, "repeats": 1},
        )
        inst.resps = list(resp) if isinstance(resp, list) else [resp]
        out.append(inst)
    return out


def ensemble(**kwargs):
    kwargs.setdefault("judge", "semantic_match")
    kwargs.setdefault("default_model", "gpt-4o")
    kwargs.setdefault("item_fn", item_fn)
    return build_filter_ensemble("none", [[JudgeFilter, kwargs]])


# ---- construction: a task definition error fails; a missing judge never costs the run ----------------


def unavailable(ensemble_):
    return ensemble_.filters[0].unavailable


def test_no_endpoint_leaves_judged_responses_unscored_naming_the_variables():
    built = ensemble()  # no endpoint: the task is still built, so the model runs and its replies are kept
    message = unavailable(built)
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_API_URL",
        "LMMS_EVAL_PLUGINS_JUDGE_MODEL",
        "LMMS_EVAL_PLUGINS_JUDGE=offline",
        "semantic_match_offline",
    ):
        assert name in message
    insts = instances(range(2), ["B", "NO ANSWER"])
    built.apply(insts, DOCS)
    (text, first), (_, second) = (judged_parts(i.filtered_resps["none"]) for i in insts)
    assert text == "B" and first.error.startswith("not judged: ") and "OPENAI_BASE_URL" in first.error
    assert second.skipped and second.error is None  # nothing to judge needs no judge: scored as before


def test_task_definition_errors_fail_at_construction(endpoint_env):
    with pytest.raises(JudgeConfigError, match="unknown option"):
        ensemble(jduge_model="x")
    with pytest.raises(JudgeConfigError, match="needs `judge"):
        ensemble(judge=None)


def test_bad_judge_configuration_is_reported_and_judges_nothing(endpoint_env, monkeypatch, tmp_path):
    assert "no_such" in unavailable(ensemble(judge="no_such"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY", "many")
    assert "LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY" in unavailable(ensemble())
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY")
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    assert "LMMS_EVAL_PLUGINS_JUDGE_CACHE" in unavailable(ensemble(cache_path=str(blocker / "cache.sqlite3")))
    assert "judge model" in unavailable(ensemble(default_model=None))
    built = ensemble(default_model=None)
    built.apply(instances([0], ["B"]), DOCS)
    assert endpoint_env.n_requests == 0
    assert unavailable(ensemble()) is None  # and a good configuration judges


def test_predict_only_runs_make_no_judge_calls(endpoint_env):
    from lmms_eval_plugins.judges.session import set_judging_deferred

    set_judging_deferred(True)
    try:
        insts = instances([0], ["B"])
        ensemble().apply(insts, DOCS)
    finally:
        set_judging_deferred(False)
    _, outcome = judged_parts(insts[0].filtered_resps["none"])
    assert "--predict_only" in outcome.error and endpoint_env.n_requests == 0


def test_predict_only_without_an_endpoint_is_not_an_error():
    """A --predict_only run needs no judge: no "not available" error, and the reason given is the deferral."""
    from loguru import logger
    from lmms_eval_plugins.judges.session import forget_announcements
    from lmms_eval_plugins.judges.session import set_judging_deferred

    forget_announcements()
    errors: list[str] = []
    sink = logger.add(lambda m: errors.append(str(m)), level="ERROR")
    set_judging_deferred(True)
    try:
        built = ensemble()  # no endpoint configured
        insts = instances([0], ["B"])
        built.apply(insts, DOCS)
    finally:
        set_judging_deferred(False)
        logger.remove(sink)
    _, outcome = judged_parts(insts[0].filtered_resps["none"])
    assert not [e for e in errors if "not available" in e]
    assert "--predict_only" in outcome.error and "OPENAI_BASE_URL" not in outcome.error
    assert "OPENAI_BASE_URL" in unavailable(built)  # still known, should the run judge after all


def test_yaml_function_tag_builds_the_filter(endpoint_env, tmp_path):
    (tmp_path / "utils.py").write_text(
        textwrap.dedent(
            """
        from lmms_eval_plugins.judges import JudgeFilter, JudgeItem

        def judge_item(response, doc):
            return JudgeItem(question=doc["question"], prediction=response, reference=doc["answer"])
        """
        )
    )
    (tmp_path / "task.yaml").write_text(
        textwrap.dedent(
            """
        task: judged_demo
        filter_list:
          - name: none
            filter:
              - function: !function utils.JudgeFilter
                judge: semantic_match
                default_model: gpt-4o
                item_fn: !function utils.judge_item
          - name: direct
            filter:
              - function: !function lmms_eval_plugins.judges.JudgeFilter
                judge: rubric
                default_model: gpt-4.1
        """
        )
    )
    config = load_yaml_config(str(tmp_path / "task.yaml"))
    built = []
    for filter_config in config["filter_list"]:  # what lmms_eval.api.task.ConfigurableTask does
        components = [[f["function"], {k: f[k] for k in f if k != "function"}] for f in filter_config["filter"]]
        built.append(build_filter_ensemble(filter_config["name"], components))
    first, second = built[0].filters[0], built[1].filters[0]
    assert copy.deepcopy(first).judge.name == "semantic_match" and pickle.loads(pickle.dumps(second)).model == "gpt-4.1"
    assert isinstance(first, JudgeFilter) and first.judge.name == "semantic_match" and first.model == "gpt-4o"
    assert isinstance(second, JudgeFilter) and second.judge.name == "rubric" and second.model == "gpt-4.1"
    insts = instances([0, 1], ["B", "wrong"])
    built[0].apply(insts, DOCS)
    assert [judged_parts(i.filtered_resps["none"])[1].verdict for i in insts] == [1.0, 0.0]


# ---- apply ---------------------------------------------------------------------------------------


def test_apply_judges_every_response(endpoint_env):
    server = endpoint_env
    resps = ["B", "A", "wrong", "NO ANSWER", "BOOM", "<think>hmm</think>", "B", "A"]
    insts = instances(range(8), resps)
    ensemble().apply(insts, DOCS)
    results = [i.filtered_resps["none"] for i in insts]
    assert all(isinstance(r, list) and len(r) == 1 for r in results)
    json.dumps(results)  # plain JSON for lmms-eval's logged samples
    first = results[0][0]
    assert first.strip() is first  # lmms-eval strips generate_until responses before process_results
    assert json.loads(str(first)) == first  # its sample logger str()s them
    assert results[0][0]["text"] == "B"
    j = results[0][0]["judge"]
    assert set(j) >= {"name", "version", "model", "verdict", "detail", "error", "cached"}
    assert (j["name"], j["version"], j["model"], j["verdict"], j["error"], j["cached"]) == (
        "semantic_match",
        "1",
        "gpt-4o",
        1.0,
        None,
        False,
    )
    outcomes = [judged_parts([r])[1] for r in results]  # what process_results gets: results == [filtered]
    assert [o.verdict for o in outcomes] == [1.0, 1.0, 0.0, None, None, 0.0, 1.0, 1.0]
    assert outcomes[3].skipped and outcomes[3].error is None  # nothing to judge: the model's fault
    assert outcomes[4].error.startswith("item_fn failed")  # a task bug is a judge error, not a 0
    assert outcomes[5].detail.get("empty_prediction")
    assert server.n_requests == 5  # skipped, failed and empty answers are not sent
    assert API_KEY not in json.dumps(results)
    score = judged_mean(outcomes)
    assert (score.n_judged, score.n_errors) == (7, 1) and score.value_percent == pytest.approx(100 * 4 / 7)
    # a second task construction (a re-run) gets everything from the cache
    insts2 = instances(range(8), resps)
    ensemble().apply(insts2, DOCS)
    assert server.n_requests == 5
    assert all(judged_parts(i.filtered_resps["none"])[1].cached for i in insts2 if i.resps[0] in ("A", "B", "wrong"))


def test_docs_follow_doc_ids_under_sharding(endpoint_env):
    # rank 1 of 2: lmms-eval passes ALL docs, but only this rank's instances (doc ids 1, 3, 5, 7)
    insts = instances([1, 3, 5, 7], ["A", "A", "A", "A"])
    ensemble().apply(insts, DOCS)
    verdicts = [judged_parts(i.filtered_resps["none"])[1].verdict for i in insts]
    assert verdicts == [1.0, 1.0, 1.0, 1.0]  # every odd doc's answer is "A"
    questions = [json.dumps(b["messages"][1]["content"]) for b in endpoint_env.requests]
    assert all(f"Question {i}?" in " ".join(questions) for i in (1, 3, 5, 7))


def test_judge_all_repeats(endpoint_env):
    insts = instances([1], [["A", "B", "A"]])
    ensemble(judge_all=True).apply(insts, DOCS)
    parts = insts[0].filtered_resps["none"]
    assert [p["judge"]["verdict"] for p in parts] == [1.0, 0.0, 1.0]
    insts = instances([1], [["A", "B", "A"]])
    ensemble().apply(insts, DOCS)
    assert len(insts[0].filtered_resps["none"]) == 1


def test_env_selects_model_and_offline(endpoint_env, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_MODEL", "my-judge")
    ens = ensemble()
    ens.apply(instances([1], ["A"]), DOCS)
    assert endpoint_env.requests[-1]["model"] == "my-judge"

    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("OPENAI_API_KEY")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE", "offline")
    ens = ensemble()  # no endpoint needed
    f = ens.filters[0]
    assert f.judge.name == "semantic_match_offline" and f.model is None
    insts = instances([0, 1], ["\\boxed{B}", "The answer is C"])
    before = endpoint_env.n_requests
    ens.apply(insts, DOCS)
    assert [judged_parts(i.filtered_resps["none"])[1].verdict for i in insts] == [1.0, 0.0]
    assert endpoint_env.n_requests == before


def test_sampling_overrides(endpoint_env, monkeypatch):
    monkeypatch.setenv(
        "LMMS_EVAL_PLUGINS_JUDGE_SAMPLING", '{"temperature": null, "max_tokens": null, "max_completion_tokens": 512}'
    )
    ensemble(sampling={"seed": 1, "max_tokens": 64}).apply(instances([1], ["A"]), DOCS)
    body = endpoint_env.requests[-1]
    assert "temperature" not in body and "max_tokens" not in body
    assert body["max_completion_tokens"] == 512 and body["seed"] == 1
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_SAMPLING", "[1]")
    assert "LMMS_EVAL_PLUGINS_JUDGE_SAMPLING" in unavailable(ensemble())


def test_openai_api_url_alias(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_URL", server.base_url + "/chat/completions")
    f = ensemble().filters[0]
    assert f.endpoint.base_url == server.base_url and f.endpoint.api_key == "EMPTY"
    insts = instances([1], ["A"])
    ensemble().apply(insts, DOCS)
    assert judged_parts(insts[0].filtered_resps["none"])[1].verdict == 1.0


def test_error_rate_threshold_in_aggregation(endpoint_env, monkeypatch):
    server = endpoint_env
    server.behaviour = lambda req: (
        server_error(500) if req.fields.get("QUESTION") in ("Question 2?", "Question 5?") else None
    )
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_MAX_ATTEMPTS", "2")
    insts = instances(range(8), ["A"] * 8)
    ensemble().apply(insts, DOCS)
    outcomes = [judged_parts(i.filtered_resps["none"])[1] for i in insts]
    assert sum(o.is_error for o in outcomes) == 2
    assert all(o.verdict in (0.0, 1.0) for o in outcomes if not o.is_error)
    # 2 of 8 have no verdict: the aggregation reports no number (null: unscored), at any threshold,
    # and never raises (that would end lmms-eval's whole evaluation)
    assert aggregate_judged([o.to_dict() for o in outcomes], metric="acc_r") is None
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE_MAX_ERROR_RATE", "0.3")
    assert aggregate_judged([o.to_dict() for o in outcomes], metric="acc_r") is None
    judged = [o.to_dict() for o in outcomes if not o.is_error]
    assert aggregate_judged(judged, metric="acc_r") == pytest.approx(
        100 * 3 / 6
    )  # odd docs answer A: 1, 3, 7 right; 5 errored
    assert check_error_rate(2, 8) == 0.25  # the explicit check still raises above the threshold for whoever wants it
    with pytest.raises(JudgeErrorRateExceeded, match="25.0%"):
        check_error_rate(2, 8, 0.05)


def test_a_failed_model_request_is_never_sent_to_the_judge(endpoint_env):
    server = endpoint_env
    failed = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."
    insts = instances(range(2), [failed, "A"])  # "A" is document 1's answer
    ensemble().apply(insts, DOCS)
    first, second = (judged_parts(i.filtered_resps["none"]) for i in insts)
    assert (
        first[0] == failed and first[1].verdict is None and first[1].error is None
    )  # kept; the task leaves it unscored
    assert second[1].verdict == 1.0
    assert server.n_requests == 1
