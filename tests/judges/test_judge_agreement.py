"""``lmms-eval-plugins judge-agreement``: statistics by hand, and the command end to end."""

from __future__ import annotations

import json
import math

import pytest
from lmms_eval_plugins.judges.agreement import (
    bootstrap_ci,
    cohen_kappa,
    main,
    raw_agreement,
)

from lmms_eval_plugins.cli import main as cli_main


def test_cohen_kappa_hand_computed():
    a = [1, 1, 0, 0, 1, 0, 1, 0, 1, 1]
    b = [1, 0, 0, 0, 1, 0, 1, 1, 1, 1]
    # po = 8/10; p(a=1) = .6, p(b=1) = .6; pe = .36 + .16 = .52; kappa = (.8 - .52) / .48
    assert raw_agreement(a, b) == pytest.approx(0.8)
    assert cohen_kappa(a, b) == pytest.approx(0.28 / 0.48)
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    assert cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == pytest.approx(1.0)
    assert math.isnan(cohen_kappa([1, 1, 1], [1, 1, 1]))  # undefined, as in scikit-learn
    with pytest.raises(ValueError):
        cohen_kappa([1], [1, 0])


def test_bootstrap_is_seeded_and_brackets_the_estimate():
    pairs = [(1, 1)] * 40 + [(0, 0)] * 40 + [(1, 0)] * 10 + [(0, 1)] * 10
    stat = lambda s: raw_agreement([x for x, _ in s], [y for _, y in s])
    lo, hi = bootstrap_ci(pairs, stat, n_resamples=500, seed=7)
    assert (lo, hi) == bootstrap_ci(pairs, stat, n_resamples=500, seed=7)
    assert (lo, hi) != bootstrap_ci(pairs, stat, n_resamples=500, seed=8)
    assert lo < 0.8 < hi and 0.65 < lo and hi < 0.95


def _write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def binary_rows():
    rows = []
    for i in range(30):
        right = i % 3 != 0
        rows.append(
            {
                "id": i,
                "question": f"Question {i}?",
                "prediction": "A" if right else "B",
                "reference": "A",
                "label": int(right) if i not in (4, 8) else int(not right),
            }
        )  # humans disagree twice
    return rows


def test_binary_agreement_llm_judge(server, monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    labels = _write_jsonl(tmp_path / "labels.jsonl", binary_rows())
    out = tmp_path / "agreement.json"
    assert (
        main([str(labels), "--judge", "semantic_match", "--model", "m", "--bootstrap", "200", "--json", str(out)]) == 0
    )
    result = json.loads(out.read_text())
    assert result["n"] == 30 and result["n_judge_errors"] == 0
    assert result["agreement"] == pytest.approx(28 / 30)
    judge = [0 if i % 3 == 0 else 1 for i in range(30)]
    human = [r["label"] for r in binary_rows()]
    assert result["kappa"] == pytest.approx(cohen_kappa(judge, human))
    assert result["kappa_ci"][0] <= result["kappa"] <= result["kappa_ci"][1]
    assert result["accounting"]["m"]["calls"] == 30
    text = capsys.readouterr().out
    assert "| 30 | 0.933 |" in text
    # seeded: the same command gives the same interval (and makes no new call: cached)
    assert main([str(labels), "--model", "m", "--bootstrap", "200", "--json", str(out)]) == 0
    again = json.loads(out.read_text())
    assert again["kappa_ci"] == result["kappa_ci"] and server.n_requests == 30


def test_rubric_agreement_offline_through_the_cli(tmp_path, capsys):
    rows = [
        {
            "question": "q",
            "prediction": "The chef slices onions. Water boils.",
            "reference": "r",
            "scoring_points": ["chef slices onions", "water boils", "garlic fried"],
            "coverage": [1, 1, 0],
            "correctness": [1, 1, 0],
        },
        {
            "question": "q",
            "prediction": "Nothing relevant.",
            "reference": "r",
            "scoring_points": ["oven preheated"],
            "coverage": [True],
            "correctness": [False],
        },
    ]
    labels = _write_jsonl(tmp_path / "rubric.jsonl", rows)
    out = tmp_path / "r.json"
    code = cli_main(
        ["judge-agreement", str(labels), "--judge", "rubric", "--offline", "--bootstrap", "100", "--json", str(out)]
    )
    assert code == 0
    result = json.loads(out.read_text())
    assert result["judge"]["name"] == "rubric_offline" and "lower fidelity" in result["judge"]["fidelity"]
    assert result["n_questions"] == 2 and result["n_points"] == 4
    # judge coverage [1,1,0,0] vs human [1,1,0,1]; correctness [1,1,0,0] vs [1,1,0,0]
    assert result["coverage_agreement"] == pytest.approx(0.75)
    assert result["correctness_agreement"] == pytest.approx(1.0)
    assert result["judge_micro_average"] == pytest.approx(100 * 4 / 8)
    assert result["human_micro_average"] == pytest.approx(100 * 5 / 8)
    assert "coverage" in capsys.readouterr().out


def test_bad_inputs_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prediction": "A", "reference": "A"}\n')
    assert main([str(bad), "--offline"]) == 2
    assert "missing field(s) ['label']" in capsys.readouterr().err
    good = _write_jsonl(tmp_path / "good.jsonl", binary_rows())
    assert main([str(good)]) == 2  # LLM judge without an endpoint
    assert "LMMS_EVAL_PLUGINS_JUDGE=offline" in capsys.readouterr().err


def test_a_strict_verdict_holding_nan_is_excluded_and_named_not_a_crash():
    from lmms_eval_plugins.judges.agreement import binary_pairs, rubric_agreement, rubric_questions, verdict_flags
    from lmms_eval_plugins.judges.base import JudgeItem, JudgeOutcome

    def outcome(coverage, correctness):
        return JudgeOutcome("rubric", "1", "m", verdict=0.5, detail={"coverage": coverage, "correctness": correctness})

    rows = [
        (JudgeItem("q", "p", "r", scoring_points=["a", "b"], item_id=str(i)), labels)
        for i, labels in enumerate([([1, 0], [1, 0]), ([1, 1], [0, 1]), ([1, 1], [1, 1]), ([0, 0], [0, 0])])
    ]
    outcomes = [
        outcome([1, 0], [True, False]),  # agrees fully
        outcome([1, 1], [1, 0]),  # correctness differs on point 2
        outcome([1, "NaN"], [1, 1]),  # a strict (official) reading kept the judge's NaN
        JudgeOutcome("rubric", "1", "m", error="timeout"),
    ]
    questions, excluded = rubric_questions(rows, outcomes)
    assert [q["judge_correctness"] for q in questions] == [[1, 0], [1, 0]]
    assert [i for i, _ in excluded] == ["2", "3"]
    assert (
        "not one 0/1 flag per scoring point" in excluded[0][1]
        and "'NaN'" in excluded[0][1]
        and excluded[1][1] == "timeout"
    )
    stats = rubric_agreement(questions, n_resamples=0, confidence=0.95, seed=0)
    # by hand over questions 0 and 1: coverage 4/4 agree; correctness judge [1,0,1,0] vs human [1,0,0,1]: 2/4
    assert stats["n_questions"] == 2 and stats["coverage_agreement"] == 1.0 and stats["correctness_agreement"] == 0.5
    # judge (1+0+1+0 + 1+1+1+0) vs human (1+0+1+0 + 1+1+0+1) points over 2 * 4: 62.5 - 62.5
    assert stats["judge_micro_average"] == 62.5 and stats["micro_average_difference"] == 0.0
    for odd in ([0.5, 1], [2, 0], ["NaN", 1], [float("nan"), 1], [1], None):
        assert verdict_flags(odd, 2) is None, odd
    assert verdict_flags([True, 0.0], 2) == [1, 0]
    binary = [(JudgeItem("q", "p", "r", item_id=str(i)), 1) for i in range(3)]
    pairs, dropped = binary_pairs(binary, [JudgeOutcome("s", "1", "m", verdict=v) for v in (1.0, float("nan"), 0.0)])
    assert pairs == [(1, 1), (0, 1)] and [i for i, _ in dropped] == ["1"]


def test_the_command_names_a_nan_verdict_among_the_excluded(tmp_path, capsys):
    from lmms_eval_plugins.judges import register_judge, unregister_judge
    from lmms_eval_plugins.judges.base import OfflineJudge, Verdict

    class NanRubric(OfflineJudge):  # lists as a strict (official) reading keeps them
        name, version, kind = "nan_rubric", "0", "rubric"

        def judge(self, item):
            return Verdict(
                0.5, detail={"coverage": ["NaN", 1] if "odd" in item.prediction else [1, 1], "correctness": [1, 0]}
            )

        def empty_verdict(self, item):
            return Verdict(0.0, detail={"coverage": [0, 0], "correctness": [0, 0]})

    rows = [
        {
            "id": f"q{i}",
            "question": "q",
            "prediction": p,
            "reference": "r",
            "scoring_points": ["a", "b"],
            "coverage": [1, 1],
            "correctness": [1, 1],
        }
        for i, p in enumerate(["fine", "odd", "fine"])
    ]
    out = tmp_path / "r.json"
    register_judge("nan_rubric", NanRubric)
    try:
        code = main(
            [
                str(_write_jsonl(tmp_path / "l.jsonl", rows)),
                "--judge",
                "nan_rubric",
                "--bootstrap",
                "10",
                "--json",
                str(out),
            ]
        )
    finally:
        unregister_judge("nan_rubric")
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["n_judge_errors"] == 1 and result["judge_errors"][0]["id"] == "q1"
    # q0 and q2: coverage [1,1] vs [1,1] agrees; correctness [1,0] vs [1,1] agrees on 2 of 4 points
    assert result["n_questions"] == 2 and result["coverage_agreement"] == 1.0 and result["correctness_agreement"] == 0.5
