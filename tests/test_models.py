"""The oracle and random models answer from the doc; random is seeded per (seed, task, doc)."""

from __future__ import annotations

from collections import Counter

import pytest
from lmms_eval.api.instance import Instance

from lmms_eval_plugins.models.oracle import Oracle
from lmms_eval_plugins.models.random_baseline import RandomChoice, chance_pick


def _request(doc_id: int, task: str = "t") -> Instance:
    return Instance(
        request_type="generate_until",
        arguments=("ctx", {}, None, doc_id, task, "test"),
        idx=0,
        metadata={"task": task, "doc_id": doc_id, "repeats": 1},
    )


def _model(cls, docs, **kwargs):
    model = cls(**kwargs)
    model.task_dict = {"t": {"test": docs}}
    return model


def test_oracle_returns_the_gold_reply():
    docs = [{"oracle_response": "Error Step: Step 2"}, {"oracle_response": "B"}]
    assert _model(Oracle, docs).generate_until([_request(1), _request(0)]) == ["B", "Error Step: Step 2"]


def test_oracle_refuses_tasks_that_are_not_ours():
    with pytest.raises(RuntimeError, match="oracle_response"):
        _model(Oracle, [{"question": "q"}]).generate_until([_request(0)])


def test_random_is_deterministic_and_covers_the_options():
    docs = [{"chance_responses": ["A", "B", "C", "D"]}] * 400
    first = _model(RandomChoice, docs, seed=3).generate_until([_request(i) for i in range(400)])
    again = _model(RandomChoice, docs, seed="3").generate_until([_request(i) for i in range(400)])
    other_seed = _model(RandomChoice, docs, seed=4).generate_until([_request(i) for i in range(400)])
    assert first == again and first != other_seed
    counts = Counter(first)
    assert set(counts) == {"A", "B", "C", "D"} and min(counts.values()) > 60  # ~100 each


def test_chance_pick_depends_on_task_and_doc():
    options = [str(k) for k in range(50)]
    assert chance_pick(options, seed=0, task="a", doc_id=1) == chance_pick(options, seed=0, task="a", doc_id=1)
    picks = {chance_pick(options, seed=0, task=t, doc_id=d) for t in "ab" for d in range(10)}
    assert len(picks) > 5
    assert chance_pick([], seed=0, task="a", doc_id=0) == ""
