"""CrossVid reference replies: what the ``oracle`` model answers (the gold, in the exact form the
prompt asks for) and what the ``random`` model picks from."""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Mapping, Sequence
from typing import Any


def _interval_reply(interval: Sequence[float]) -> str:
    return ",".join(f"{float(x):g}" for x in interval)


def oracle_reply(doc: Mapping[str, Any]) -> str:
    """The reply a perfect model gives, in the exact form the prompt asks for (passes strict too)."""
    task, gold = doc["task"], doc["gold"]
    if task == "BU":
        return gold["exact"]
    if task == "FSA":
        return _interval_reply(gold["interval"])
    if task == "PSS":
        return gold["exact"]
    if task == "CCQA":
        # the standard answer followed by every scoring point: full marks from a faithful judge
        return "\n".join([doc["answer_text"], *doc["scoring_points"]])
    return gold["exact"]


def chance_replies(doc: Mapping[str, Any]) -> list[str]:
    """What the ``random`` model picks from: every option (letter tasks), every set of 1-3 letters
    (BU), orders (PSS: all when n <= 5, else 120 seeded permutations), the reference segment's own
    timestamps (FSA: a same-time baseline; a uniform interval would need the video length), none (CCQA)."""
    task = doc["task"]
    if task == "BU":
        letters = doc["letters"]
        return ["".join(c) for r in (1, 2, 3) for c in itertools.combinations(letters, r)]
    if task == "PSS":
        n = len(doc["media"])
        if n <= 5:
            return ["->".join(map(str, p)) for p in itertools.permutations(range(1, n + 1))]
        rng = random.Random(int.from_bytes(hashlib.sha256(doc["record"].encode()).digest()[:8], "big"))
        seen: dict[str, None] = {}
        while len(seen) < 120:
            order = list(range(1, n + 1))
            rng.shuffle(order)
            seen.setdefault("->".join(map(str, order)), None)
        return list(seen)
    if task == "FSA":
        return [_interval_reply(doc["gold"]["ref"])]
    if task == "CCQA":
        return []
    return list(doc["letters"])
