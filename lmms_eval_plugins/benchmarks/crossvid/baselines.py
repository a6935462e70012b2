"""CrossVid reference replies: what the ``oracle`` model answers (the gold, in the exact form the
prompt asks for) and what the ``random`` model picks from."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_eval_plugins.benchmarks.crossvid.records import (
    CrossVidRecord,
    IntervalGold,
    OrderGold,
    PointsGold,
    record_of,
)


def _interval_reply(interval: Sequence[float]) -> str:
    return ",".join(f"{float(x):g}" for x in interval)


def oracle_reply(doc: Mapping[str, Any] | CrossVidRecord) -> str:
    """The reply a perfect model gives, in the exact form the prompt asks for (passes strict too)."""
    gold = record_of(doc).gold
    if isinstance(gold, IntervalGold):
        return _interval_reply(gold.interval)
    if isinstance(gold, OrderGold):  # an answer written other than as text: the order as the prompt asks
        return gold.exact if gold.exact is not None else "->".join(map(str, gold.order))
    if isinstance(gold, PointsGold):
        # the standard answer followed by every scoring point: full marks from a faithful judge
        return "\n".join([gold.answer, *gold.scoring_points])
    return gold.exact  # BU: "".join(answer); the letter tasks: the answer letter


def chance_replies(doc: Mapping[str, Any] | CrossVidRecord) -> list[str]:
    """What the ``random`` model picks from: every option (letter tasks), every set of 1-3 letters
    (BU), orders (PSS: all when n <= 5, else 120 seeded permutations), the reference segment's own
    timestamps (FSA: a same-time baseline; a uniform interval would need the video length), none (CCQA)."""
    rec = record_of(doc)
    task = rec.task
    if task == "BU":
        letters = rec.letters
        return ["".join(c) for r in (1, 2, 3) for c in itertools.combinations(letters, r)]
    if task == "PSS":
        n = len(rec.media)
        if n <= 5:
            return ["->".join(map(str, p)) for p in itertools.permutations(range(1, n + 1))]
        rng = random.Random(int.from_bytes(hashlib.sha256(rec.record.encode()).digest()[:8], "big"))
        seen: dict[str, None] = {}
        while len(seen) < 120:
            order = list(range(1, n + 1))
            rng.shuffle(order)
            seen.setdefault("->".join(map(str, order)), None)
        return list(seen)
    if isinstance(rec.gold, IntervalGold):
        return [_interval_reply(rec.gold.ref)] if rec.gold.ref is not None else []
    if task == "CCQA":
        return []
    return list(rec.letters)
