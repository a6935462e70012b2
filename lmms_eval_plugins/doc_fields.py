"""Plumbing every task shares: the fields each doc carries, and the repeated-rounds protocol.

Docs built by our ``process_docs`` always carry:
- ``oracle_response``: the exact reply a perfect model gives, in the format the prompt asks for
  (the ``oracle`` model returns it; YAMLs use it as ``doc_to_target`` so logs show the gold reply);
- ``chance_responses``: the replies a chance answerer picks from (the ``random`` model);
- ``round``: 0-based round index when a task repeats every record (ErrorRadar's three-round average).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence, TypeVar

from lmms_eval_plugins.metrics import mean_std

ORACLE_FIELD = "oracle_response"
# `LMMS_EVAL_PLUGINS_STRICT=1`: official-parity parsing wherever a benchmark has it (`score --strict`).
STRICT_ENV = "LMMS_EVAL_PLUGINS_STRICT"
CHANCE_FIELD = "chance_responses"
ROUND_FIELD = "round"

T = TypeVar("T")


def with_rounds(docs: Iterable[dict[str, Any]], rounds: int) -> list[dict[str, Any]]:
    """Repeat every doc ``rounds`` times, tagging each copy with its round (1 round: unchanged)."""
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    docs = list(docs)
    return [{**doc, ROUND_FIELD: r} for r in range(rounds) for doc in docs]


def by_round(items: Sequence[Mapping[str, Any]]) -> list[list[Mapping[str, Any]]]:
    """Group per-doc result items by their ``round`` (items without one form round 0)."""
    groups: dict[int, list[Mapping[str, Any]]] = {}
    for item in items:
        groups.setdefault(int(item.get(ROUND_FIELD, 0) or 0), []).append(item)
    return [groups[r] for r in sorted(groups)]


def round_mean_std(
    items: Sequence[Mapping[str, Any]], metric: Callable[[Sequence[Mapping[str, Any]]], float]
) -> tuple[float, float]:
    """``metric`` computed per round, then mean and standard deviation over rounds."""
    return mean_std([metric(group) for group in by_round(items)])


def truthy(value: Any) -> bool:
    """An option switched on: True, or the text 1/true/yes (any case)."""
    return value is True or (isinstance(value, str) and value.strip().lower() in ("1", "true", "yes"))


def strict_requested(env: Mapping[str, str] | None = None) -> bool:
    """Whether the environment asks for official-parity (strict) scoring (``LMMS_EVAL_PLUGINS_STRICT=1``).
    A run reads it once, when it starts: see :func:`lmms_eval_plugins.run_state.strict_mode`."""
    import os

    return truthy((os.environ if env is None else env).get(STRICT_ENV, ""))
