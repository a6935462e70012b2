"""The generic replay filter (benchmark-independent; CausalStep's chain is tested in test_causalstep.py)."""

from __future__ import annotations

import json

import pytest

from lmms_eval_plugins.benchmarks.causalstep.chain_filter import (
    GroupAttachment,
    GroupReplayFilter,
    unpack_filtered,
)


def count_yes(docs, responses):
    return {"n": len(docs), "yes": sum(r == "yes" for r in responses), "first": docs[0]["id"]}


DOCS = [{"id": "a1", "g": "a"}, {"id": "b1", "g": "b"}, {"id": "a2", "g": "a"}, {"id": "x"}]


def test_groups_by_key_and_attaches_the_result_to_the_first_doc_of_each_group():
    calls = []

    def replay(docs, responses):
        calls.append([d["id"] for d in docs])
        return count_yes(docs, responses)

    out = GroupReplayFilter(key="g", replay=replay, id_field="id").apply(
        [["yes"], ["no"], ["yes", "ignored"], ["?"]], DOCS
    )
    assert calls == [["a1", "a2"], ["b1"]]  # once per group, members in doc order
    assert [o[0] for o in out] == ["yes", "no", "yes", "?"]  # first response of each doc
    assert out[0][1]["result"] == {"n": 2, "yes": 2, "first": "a1"} and out[0][1]["result_on"] == "a1"
    assert out[2][1]["result"] is None and out[2][1]["result_on"] == "a1" and out[2][1]["group"] == "a"
    assert out[1][1]["result"] == {"n": 1, "yes": 0, "first": "b1"}
    assert out[3][1]["group"] is None and out[3][1]["result"] is None  # no key: no group
    assert json.loads(str(out[0][1]))["result"]["yes"] == 2  # the sample log writes it with str()


def test_survives_lmms_eval_strip_and_unpacks():
    out = GroupReplayFilter(key="g", replay=count_yes, id_field="id").apply([["yes"]] * 4, DOCS)
    # ConfigurableTask.process_results does [res.strip() for res in results[0]] on a list response
    received = [res.strip() for res in out[0]]
    assert isinstance(received[1], GroupAttachment)
    text, attachment = unpack_filtered(received, doc=DOCS[0], id_field="id")
    assert text == "yes" and attachment["result"]["n"] == 2
    assert unpack_filtered(["plain"]) == ("plain", None)  # a task run without the filter
    assert unpack_filtered([out[0]], doc=DOCS[0], id_field="id")[1]["ref"] == "a1"  # nested, as the evaluator passes it
    assert unpack_filtered(received, doc=DOCS[2], id_field="id")[1] is None  # made for another doc


def test_limit_prefix_and_missing_docs():
    # --limit 2: two responses, all docs -> only the first two docs are grouped
    out = GroupReplayFilter(key="g", replay=count_yes, id_field="id").apply([["yes"], ["yes"]], DOCS)
    assert len(out) == 2 and out[0][1]["result"]["n"] == 1
    # the base Task passes docs=None: responses go through, no groups
    out = GroupReplayFilter(key="g", replay=count_yes).apply([["yes"]], None)
    assert out == [["yes", {"group": None, "ref": None, "result": None, "result_on": None}]]


@pytest.mark.parametrize("world_size", ["2", "8"])
def test_several_ranks_attach_nothing(monkeypatch, world_size):
    monkeypatch.setenv("WORLD_SIZE", world_size)
    out = GroupReplayFilter(key="g", replay=count_yes, id_field="id").apply([["yes"]] * 4, DOCS)
    assert all(o[1]["result"] is None for o in out)
