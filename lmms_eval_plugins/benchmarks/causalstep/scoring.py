"""CausalStep's aggregations: the per-request items in, one number (or breakdown) out.

Every metric is computed here, from the items of every rank, never from the filter's logged chains
(which lmms-eval cannot line up across ranks or with ``--offset``): each video's chain is replayed
from its items (:func:`video_chain`, Algorithm 1 in protocol.py). A video whose requests were cut
short (a ``--limit`` run) is left out of the chain metrics and counted. spec.py names which
aggregation each metric uses. Pure functions of the items tasks.py builds (``video_id``,
``category``, ``n_segments``, ``segment``, ``kind``, ``restart``, ``gold``, ``pred``, ``correct``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from lmms_eval_plugins.benchmark import Aggregation, Items
from lmms_eval_plugins.benchmarks.causalstep.protocol import (
    DESC,
    ID_FIELD,
    ISOLATED,
    replay_chain,
    request_id,
)
from lmms_eval_plugins.metrics import accuracy
from lmms_eval_plugins.stats import Sufficient

CHAIN_FIELD, CHAIN_ON_FIELD = "chain", "chain_on"  # the video's replayed chain, and the request holding it
LOG_FIELDS = (CHAIN_FIELD, CHAIN_ON_FIELD)  # logged on one metric's item only (spec.py)
NO_CATEGORY = "(none)"


def request_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """The request's own fields, without the logged chain (every metric's item but the one that logs it)."""
    return {k: v for k, v in item.items() if k not in LOG_FIELDS}


def video_chain(items: Items) -> dict[str, Any]:
    """Replay Algorithm 1 for one video from its request items (JSON-serialisable).

    ``complete`` is False when a question the chain asks has no item (e.g. a ``--limit`` run that
    cut the video's requests short); such a video is left out of the chain metrics and counted.
    """
    first = items[0]
    video_id, n, restart = first["video_id"], int(first["n_segments"]), first["restart"]
    by_key = {(it["kind"], int(it["segment"])): it for it in items}
    try:
        replay = replay_chain(n, lambda kind, segment: bool(by_key[(kind, segment)]["correct"]), restart)
    except KeyError as exc:
        kind, segment = exc.args[0]
        return {
            "video_id": video_id,
            "category": first["category"],
            "complete": False,
            "missing": request_id(video_id, segment, kind),
        }
    out = {"video_id": video_id, "category": first["category"], "complete": True, **replay.to_dict()}
    out["steps"] = [
        {
            "step": k,
            ID_FIELD: request_id(video_id, s["segment"], s["kind"]),
            **s,
            "pred": by_key[(s["kind"], s["segment"])]["pred"],
            "gold": by_key[(s["kind"], s["segment"])]["gold"],
        }
        for k, s in enumerate(out["steps"], start=1)
    ]
    return out


def chains(items: Items) -> list[dict[str, Any]]:
    """Every video's replayed chain, in order of first appearance (the filter's logged chains come
    from the same function)."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for item in items:
        groups.setdefault(item["video_id"], []).append(item)
    return [video_chain(group) for group in groups.values()]


def complete_chains(items: Items) -> list[dict[str, Any]]:
    return [c for c in chains(items) if c["complete"]]


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# ------------------------------------------------------------------------ the paper's seven metrics


def chain_success_rate(items: Items) -> float:
    """CSR: % of videos whose whole chain was answered without a wrong answer."""
    return 100.0 * _mean([1.0 if c["completed"] else 0.0 for c in complete_chains(items)])


def average_max_chain_length(items: Items) -> float:
    """AMCL: the mean over videos of the longest run of correct answers (in questions)."""
    return _mean([c["longest_chain"] for c in complete_chains(items)])


def max_chain_length(items: Items) -> int:
    """MCL: the longest run of correct answers over all videos (in questions)."""
    return max((c["longest_chain"] for c in complete_chains(items)), default=0)


def restart_frequency(items: Items) -> float:
    """RF: the mean number of restarts (wrong answers) per video."""
    return _mean([c["restarts"] for c in complete_chains(items)])


def weighted_score(items: Items) -> float:
    """WS: the mean over videos of the chain's weighted score."""
    return _mean([c["score"] for c in complete_chains(items)])


def perfect_weighted_score(items: Items) -> float:
    """The mean over videos of N(N+1)/2, the weighted score of a perfect chain on this data."""
    return _mean([c["n_segments"] * (c["n_segments"] + 1) / 2 for c in complete_chains(items)])


def descriptive_accuracy(items: Items) -> float:
    """DUA: % of descriptive questions answered right (every one of them, in or out of the chain)."""
    return accuracy([bool(i["correct"]) for i in items if i["kind"] == DESC])


def isolated_causal_accuracy(items: Items) -> float:
    """ICRA: % of causal questions answered right when shown their segment alone, without history."""
    return accuracy([bool(i["correct"]) for i in items if i["kind"] == ISOLATED])


# ------------------------------------------------------------------------ counts and breakdowns


def complete_videos(items: Items) -> int:
    return len(complete_chains(items))


def count_incomplete_videos(items: Items) -> int:
    return sum(1 for c in chains(items) if not c["complete"])


def parse_failures(items: Items) -> int:
    return sum(1 for i in items if i["pred"] is None)


def per_category(metrics: Mapping[str, Aggregation]) -> Aggregation:
    """The ``metrics`` (name -> aggregation) per video category, categories sorted by name."""

    def aggregate(items: Items) -> dict[str, dict[str, Any]]:
        groups: dict[str, list[Mapping[str, Any]]] = {}
        for item in items:
            groups.setdefault(item["category"] or NO_CATEGORY, []).append(item)
        return {
            category: {name: metric(groups[category]) for name, metric in metrics.items()}
            for category in sorted(groups)
        }

    return aggregate


# ------------------------------------------------------------------------ error bars: every resample at once (issue 40)

# Per item: the video's complete chain on the row of its first request (complete, completed, longest run,
# restarts, weighted score, perfect score; an incomplete video's row zeros), each request's own
# descriptive and isolated counts (asked, right), then the chain's longest run as a count per length
# (0, 1, ... the longest in the data): MCL, a maximum, is the longest length a resample counts. Videos
# are the cluster unit, so a resample takes a video's rows together and the sums give every chain metric.
_COMPLETE, _COMPLETED, _LONGEST, _RESTARTS, _SCORE, _PERFECT, _DESC, _DESC_RIGHT, _ISO, _ISO_RIGHT, _LENGTHS = range(11)


def chain_columns(items: Items) -> np.ndarray:
    complete = complete_chains(items)
    longest = max((int(c["longest_chain"]) for c in complete), default=0)
    out = np.zeros((len(items), _LENGTHS + longest + 1))
    first_row: dict[str, int] = {}
    for k, item in enumerate(items):
        first_row.setdefault(item["video_id"], k)
        if item["kind"] == DESC:
            out[k, _DESC : _DESC + 2] = (1, bool(item["correct"]))
        elif item["kind"] == ISOLATED:
            out[k, _ISO : _ISO + 2] = (1, bool(item["correct"]))
    for chain in complete:
        n, row = chain["n_segments"], first_row[chain["video_id"]]
        out[row, :_DESC] = (
            1,
            bool(chain["completed"]),
            chain["longest_chain"],
            chain["restarts"],
            chain["score"],
            n * (n + 1) / 2,
        )
        out[row, _LENGTHS + int(chain["longest_chain"])] = 1
    return out


def _longest_counted(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
    """MCL: the longest run a resample's complete chains hold (0 without any, as ``max(..., default=0)``)."""
    counted = sums[:, _LENGTHS:] > 0
    lengths = np.arange(counted.shape[1], dtype=float)
    return np.where(counted, lengths[None, :], 0.0).max(axis=1, initial=0.0)


def _per(numerator: int, denominator: int, scale: float = 1.0) -> Sufficient:
    """scale * sum(numerator) / sum(denominator), 0.0 without any (as ``_mean`` and ``accuracy`` say)."""

    def value(sums: np.ndarray, full: np.ndarray) -> np.ndarray:
        den = sums[:, denominator]
        return np.where(den > 0, scale * sums[:, numerator] / np.where(den > 0, den, 1.0), 0.0)

    return Sufficient(chain_columns, value)


# each the same arithmetic as the aggregation of the same meaning above (spec.py pairs them with their metrics)
CHAIN_SUCCESS_RATE = _per(_COMPLETED, _COMPLETE, 100.0)
AVERAGE_LONGEST_RUN = _per(_LONGEST, _COMPLETE)
LONGEST_RUN = Sufficient(chain_columns, _longest_counted)
RESTARTS_PER_VIDEO = _per(_RESTARTS, _COMPLETE)
WEIGHTED_SCORE_MEAN = _per(_SCORE, _COMPLETE)
PERFECT_SCORE_MEAN = _per(_PERFECT, _COMPLETE)
DESCRIPTIVE_ACCURACY = _per(_DESC_RIGHT, _DESC, 100.0)
ISOLATED_ACCURACY = _per(_ISO_RIGHT, _ISO, 100.0)
