"""Unscored samples: a request that failed is kept apart from a wrong answer.

A sample is *unscored* when its number cannot be known yet: its model request failed, or the judge
that its metric needs gave no verdict (an outage, no endpoint configured, a ``--predict_only`` run).
lmms-eval's API model classes (``openai``, ``async_openai``, ...) do not raise when a request fails
after their retries: they return a marker text such as ``[LMMS_EVAL_REQUEST_FAILED after 5 retries]
Connection error.`` (or ``[LMMS_EVAL_BUDGET_EXCEEDED]`` when the usage budget stopped the run). Our
parsers would read such a text as an unparseable answer and score it wrong. Instead a sample with
such a reply is unscored: every metric that needs it is ``null`` in the results JSON and the task's
``unscored`` metric counts the samples; the logged sample carries the reason.
``lmms-eval-plugins score`` finishes judge-unscored samples later from the stored replies.

Per-sample items and aggregations carry the mark the same way in every benchmark:
- :func:`mark_unscored` tags the per-sample items ``process_results`` returns;
- :func:`guard` wraps an aggregation so it returns ``None`` when any item is unscored;
- :func:`count_unscored` is the aggregation of the ``unscored`` metric;
- :func:`group_mean` replaces lmms-eval's group ``mean``, which would raise on a ``null`` subtask score.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from functools import wraps
from typing import Any, TypeVar

from lmms_eval_plugins.run_state import current_run
from lmms_eval_plugins.run_state import normalised_path as _norm

# Records left out of a run (by reason), carried on every doc of the run as [{"reason": ..., "count": ...}]
# (Arrow-native: a list of structs), so the count reaches the aggregation through lmms-eval itself (per
# run: no module state; every rank agrees).
SKIPPED_FIELD = "skipped_records"
SKIPPED_METRIC = "skipped"
SKIPPED_BY_REASON_METRIC = "skipped_by_reason"
UNSCORED_FIELD = "unscored"
UNSCORED_METRIC = "unscored"
REQUEST_FAILED = "model request failed"
BUDGET_EXCEEDED = "model request not sent: usage budget exceeded"

# lmms-eval 0.7.3's failure markers (models/chat/openai.py, models/simple/openai.py, usage_metrics.py).
_FAILURE_MARKERS = (
    ("[LMMS_EVAL_REQUEST_FAILED", REQUEST_FAILED),
    ("[LMMS_EVAL_BUDGET_EXCEEDED]", BUDGET_EXCEEDED),
)

T = TypeVar("T")

# Media that failed to decode at request time, with skipping on: lmms_eval_plugins/media.py notes it in
# the run's state (lmms_eval_plugins/run_state.py; the model got a placeholder), the item is left out here.
MEDIA_SKIP_FIELD = "skipped_media"
UNREADABLE_MEDIA = "unreadable media"


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif depth < 3 and isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v, depth + 1)
    elif depth < 3 and isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v, depth + 1)


def unreadable_media_of(doc: Mapping[str, Any], noted: Mapping[str, Iterable[str | None]] | None = None) -> str | None:
    """The record key of ``doc`` when one of its media files was noted unreadable, else None.

    ``noted``: {path: record ids (None: any record)}, by default what the current run noted
    (:meth:`lmms_eval_plugins.run_state.RunState.unreadable_media`). A doc matches when it names the noted
    path (as a field, nested up to three levels, or inside a field holding JSON text, as a third-party
    task's rows may: ours carry Arrow lists and structs)
    and, where the loader was given a record id, holds that id as one of its fields."""
    if noted is None:
        noted = current_run().unreadable_media()
    if not noted:
        return None
    ids = {str(v) for v in doc.values() if isinstance(v, (str, int)) and not isinstance(v, bool)}
    for text in _strings(doc):
        if len(text) < 4096 and (records := noted.get(_norm(text))) is not None:
            found = [(_norm(text), records)]
        elif text[:1] in "[{":
            found = [(path, records) for path, records in noted.items() if json.dumps(path) in text]
        else:
            continue
        for path, records in found:
            for record in records:
                if record is None or record in ids:
                    return f"{record or ''}|{_norm(path)}"
    return None


def is_media_skipped(item: Any) -> bool:
    return isinstance(item, Mapping) and bool(item.get(MEDIA_SKIP_FIELD))


def request_failure(response: Any) -> str | None:
    """Why a model reply is not an answer (``"model request failed"``...), or None for a real reply."""
    if not isinstance(response, str):
        return None
    head = response.lstrip()[:64]
    for marker, reason in _FAILURE_MARKERS:
        if head.startswith(marker):
            return reason
    return None


def first_failure(responses: Iterable[Any]) -> str | None:
    """The failure reason of the first failed reply among ``responses`` (nested lists included)."""
    for response in responses:
        reason = first_failure(response) if isinstance(response, (list, tuple)) else request_failure(response)
        if reason:
            return reason
    return None


def is_unscored(item: Any) -> bool:
    return isinstance(item, Mapping) and bool(item.get(UNSCORED_FIELD))


def mark_unscored(per_metric: Mapping[str, Any], reason: str) -> dict[str, Any]:
    """``process_results``' output with every item marked unscored (the parsed fields stay, for the logs)."""
    marked: dict[str, Any] = {}
    cache: dict[int, Any] = {}  # one marked copy per shared item object
    for metric, item in per_metric.items():
        if id(item) not in cache:
            cache[id(item)] = (
                {**item, UNSCORED_FIELD: reason}
                if isinstance(item, Mapping)
                else {"value": item, UNSCORED_FIELD: reason}
            )
        marked[metric] = cache[id(item)]
    return marked


# How a judge outcome that no judge was asked for starts (no judge configured, --predict_only): the sample
# is unscored "not judged", never counted as a judge error.
NOT_JUDGED = "not judged"


def judge_failure(outcome: Any) -> str | None:
    """Why a judge outcome (a ``JudgeOutcome`` or its dict) gave no verdict, or None when it did its job."""
    error = outcome.get("error") if isinstance(outcome, Mapping) else getattr(outcome, "error", None)
    if not error:
        return None
    error = str(error)
    return error if error.startswith(NOT_JUDGED) else f"judge error: {error}"


def with_unscored(
    per_metric: Mapping[str, Any],
    responses: Sequence[Any],
    *,
    judge: Any = None,
    judged: Iterable[str] = (),
    doc: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``process_results``' output plus the ``unscored`` item (and, given the ``doc``, the skipped-records items).

    A failed model request marks every item. A judge that gave no verdict (``judge``: the sample's
    outcome) marks only the ``judged`` metrics, the ones computed from verdicts: the others stay.
    The skipped-records items describe the run, not the sample: never unscored.
    """
    skipped_as = unreadable_media_of(doc) if doc is not None else None
    if skipped_as is not None:  # the model saw a placeholder: left out of every metric, counted as skipped
        out = {
            m: {
                **(v if isinstance(v, Mapping) else {"value": v}),
                MEDIA_SKIP_FIELD: UNREADABLE_MEDIA,
                "skipped_key": skipped_as,
            }
            for m, v in per_metric.items()
        }
        out[UNSCORED_METRIC] = {UNSCORED_FIELD: None}
        if SKIPPED_FIELD in doc:
            out[SKIPPED_METRIC] = out[SKIPPED_BY_REASON_METRIC] = {
                SKIPPED_FIELD: doc[SKIPPED_FIELD],
                MEDIA_SKIP_FIELD: UNREADABLE_MEDIA,
                "skipped_key": skipped_as,
            }
        return out
    reason = first_failure(responses)
    if reason:
        out = mark_unscored(per_metric, reason)
    else:
        out = dict(per_metric)
        reason = judge_failure(judge) if judge is not None else None
        if reason:
            out.update(mark_unscored({m: v for m, v in per_metric.items() if m in set(judged)}, reason))
    out[UNSCORED_METRIC] = {UNSCORED_FIELD: reason}
    if doc is not None and SKIPPED_FIELD in doc:
        out[SKIPPED_METRIC] = out[SKIPPED_BY_REASON_METRIC] = {SKIPPED_FIELD: doc[SKIPPED_FIELD]}
    return out


def stamped_counts(stamp: Any) -> dict[str, int] | None:
    """{reason: count} of a doc's skipped-records stamp (``[{"reason": ..., "count": ...}]``, as
    :func:`lmms_eval_plugins.data.stamp_skipped` writes it); None for anything else. Entries that are not
    a reason with a positive count are left out."""
    if not isinstance(stamp, (list, tuple)):
        return None
    counts: dict[str, int] = {}
    for entry in stamp:
        if not isinstance(entry, Mapping):
            return None
        reason, count = entry.get("reason"), entry.get("count")
        if isinstance(reason, str) and type(count) is int and count > 0:
            counts[reason] = counts.get(reason, 0) + count
    return counts


def skipped_counts(items: Sequence[Any]) -> dict[str, int]:
    """{reason: records left out} of the run these items come from: the load-time counts every item
    carries, plus the records whose media failed to decode at request time (each counted once)."""
    counts: dict[str, int] = {}
    for item in items:
        stamped = stamped_counts(item.get(SKIPPED_FIELD) if isinstance(item, Mapping) else None)
        if stamped is not None:
            counts = stamped
            break
    late: dict[str, set[str]] = {}
    for item in items:
        if is_media_skipped(item):
            late.setdefault(str(item[MEDIA_SKIP_FIELD]), set()).add(str(item.get("skipped_key")))
    for reason, keys in late.items():
        counts[reason] = counts.get(reason, 0) + len(keys)
    return dict(sorted(counts.items()))


def agg_skipped(items: Sequence[Any]) -> int:
    """The ``skipped`` metric: records left out of the run (all reasons)."""
    return sum(skipped_counts(items).values())


def agg_skipped_by_reason(items: Sequence[Any]) -> dict[str, int]:
    """The ``skipped_by_reason`` metric: {reason: records left out}; ``{}`` when none was."""
    return skipped_counts(items)


# The counts read every item themselves (a media-skipped item is what they count): never guarded.
agg_skipped._unscored_guard = True  # type: ignore[attr-defined]
agg_skipped_by_reason._unscored_guard = True  # type: ignore[attr-defined]


def guard(aggregation: Callable[[Sequence[Any]], T]) -> Callable[[Sequence[Any]], T | None]:
    """An aggregation that is ``None`` (JSON null) when any of its items is unscored."""
    if getattr(aggregation, "_unscored_guard", False):
        return aggregation

    @wraps(aggregation)
    def guarded(items: Sequence[Any]) -> T | None:
        if any(is_unscored(item) for item in items):
            return None
        kept = [item for item in items if not is_media_skipped(item)]  # skipped samples are in no metric
        if not kept and items:
            return None
        return aggregation(kept)

    guarded._unscored_guard = True  # type: ignore[attr-defined]
    return guarded


def count_unscored(items: Sequence[Any]) -> int:
    """Aggregation of the ``unscored`` metric: how many samples could not be scored."""
    return sum(1 for item in items if is_unscored(item))


count_unscored._unscored_guard = True  # type: ignore[attr-defined]  # the one aggregation that counts them


def group_mean(
    metrics: Sequence[float | int | None], sizes: Sequence[int], weight_by_size: bool = True
) -> float | int | None:
    """lmms-eval's group ``mean`` of subtask scores, made safe for unscored samples.

    lmms-eval applies a group's ``aggregate_metric_list`` entry to every metric whose name *contains*
    the entry's name, so ``score`` also reaches ``score_strict`` and the ``unscored`` count. A score is
    averaged exactly as lmms-eval's ``mean`` does; a count (every subtask value an ``int``) is summed;
    ``None`` when a subtask's value is ``None`` (lmms-eval's own mean would raise and end the run).
    """
    if any(m is None for m in metrics):
        return None
    if metrics and all(isinstance(m, int) and not isinstance(m, bool) for m in metrics):
        return sum(metrics)
    weights = list(sizes) if weight_by_size else [1] * len(metrics)
    total = sum(weights)
    return sum(m * w for m, w in zip(metrics, weights)) / total if total else None
