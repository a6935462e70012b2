"""ViRectify's key times: a reply mixing interval forms keeps every interval (issue 30), while a bare
number range beside clock times is still no interval."""

from __future__ import annotations

import pytest

from lmms_eval_plugins.benchmarks.virectify import tasks as vr
from lmms_eval_plugins.parsing import parse_intervals


@pytest.mark.parametrize(
    "text, intervals",
    [
        ("[24s]-[30s], [00:28]-[00:36]", [(24.0, 30.0), (28.0, 36.0)]),  # the reply
        ("[00:28]-[00:36]; [24s]-[30s]", [(28.0, 36.0), (24.0, 30.0)]),  # either order
        ("[00:12-00:20], 40-45 sec", [(12.0, 20.0), (40.0, 45.0)]),  # a unit on one end marks a time
        ("[00:12-00:20] and between 40 and 45 seconds", [(12.0, 20.0), (40.0, 45.0)]),
        ("[00:12-00:20] (the ball bounces 2-3 times)", [(12.0, 20.0)]),  # no unit, no clock: a count
        ("2-3 and 5-8", [(2.0, 3.0), (5.0, 8.0)]),  # no clock time at all: every range
    ],
)
def test_clock_first_keeps_every_interval_written_as_a_time(text, intervals):
    assert parse_intervals(text, clock_first=True) == intervals


def test_a_mixed_reply_scores_both_intervals():
    reply = (
        "<error_identify>{'step1': ['0', 'misread']}</error_identify><error_graph>{}</error_graph>"
        "<timestamps>[24s]-[30s], [00:28]-[00:36]</timestamps>"
        "<rationale>... <answer>The correct answer should be \\boxed{B}</answer></rationale>"
    )
    assert vr.parse_response(reply)["intervals"] == [(24.0, 30.0), (28.0, 36.0)]
