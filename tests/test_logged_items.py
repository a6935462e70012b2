"""Issue 41: a samples line holds each per-sample item once (``logged_samples``' writer and readers), by hand."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from lmms_eval_plugins import logged_samples as ls

ITEM = {"question_id": "q1", "gold": "VIS", "pred": "CAL", "correct": False}
LINE = {
    "doc_id": 0,
    "doc": {"id": "q1"},
    "target": "VIS",
    "filtered_resps": "CAL",
    "input_media": ["a.png"],
    "acc": ITEM,
    "f1_vis": dict(ITEM),
    "f1_cal": dict(ITEM),
    "own": 0.5,
    "per_item": {"value": 1},
    "unscored": {"unscored": None},
}
METRICS = ("acc", "f1_vis", "f1_cal", "own", "per_item", "unscored")


def test_the_writer_keeps_the_first_item_and_every_value_of_its_own():
    written = ls.without_repeated_items(LINE, frozenset(METRICS))
    assert list(written) == [
        "doc_id",
        "doc",
        "target",
        "filtered_resps",
        "input_media",
        "acc",
        "own",
        "per_item",
        "unscored",
    ]
    assert written["acc"] == ITEM and written["per_item"] == {"value": 1}
    # the document is not a metric: never taken for the first item, never left out
    assert ls.without_repeated_items({"doc": ITEM, "m": ITEM}, {"m"}) == {"doc": ITEM, "m": ITEM}


def test_readers_find_each_metric_item_under_its_name_or_first():
    written = ls.without_repeated_items(LINE, frozenset(METRICS))
    assert ls.first_item(written) == ITEM  # "doc" is BULKY: skipped
    assert [ls.item_of(written, m) for m in METRICS] == [LINE[m] for m in METRICS]
    assert ls.with_every_item(written, METRICS) == LINE
    assert ls.with_every_item({"doc_id": 1}, METRICS) == {"doc_id": 1}  # no item to share
    assert ls.lean(written) == ls.lean(LINE)  # report and compare read both layouts alike


items = st.dictionaries(st.sampled_from(["gold", "pred", "x"]), st.integers(0, 2), min_size=1, max_size=2)


@given(st.lists(st.one_of(items, st.floats(allow_nan=False)), min_size=1, max_size=8))
def test_writing_then_reading_gives_every_metric_its_value_back(values):
    line = {"doc_id": 3, **{f"m{i}": v for i, v in enumerate(values)}}
    names = [f"m{i}" for i in range(len(values))]
    written = ls.without_repeated_items(line, frozenset(names))
    assert ls.with_every_item(written, names) == line
    assert [ls.item_of(written, m) for m in names] == values
    first = ls.first_item(written)
    assert sum(1 for v in written.values() if isinstance(v, dict) and v == first) == 1 if first is not None else True
