"""The two caller-frame reads (entries ``filter-instances`` and ``request-loop`` of
:data:`lmms_eval_plugins.compat.ENTRIES`). lmms-eval 0.7.3 offers no supported route to either fact.

Each read is done only while its entry's check passes (:func:`lmms_eval_plugins.compat.available`:
one warning per process otherwise) and answers None whenever the frame does not hold what it looks
for; the caller then falls back (documents aligned by position; inputs prepared inline), so a change
in lmms-eval costs a feature, never a result.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import FrameType
from typing import Any

from lmms_eval_plugins import compat

# ----------------------------------------------------------------------------------------------- filter-instances


def caller_instances(depth: int = 1) -> list[Any] | None:
    """The ``instances`` argument of lmms-eval's ``FilterEnsemble.apply``, read from the frame ``depth``
    levels above the caller of this function (1: the caller's caller), or None.

    ``Filter.apply(resps, docs)`` gets this process's responses (rank-sharded, cut by
    ``--limit``/``--offset``) but the task's full document list; the instances (their ``doc_id``) say
    which document each response answers, and exist only in that calling frame.
    """
    if not compat.available("filter-instances"):
        return None
    try:
        frame: FrameType | None = sys._getframe(depth + 1)
        instances = frame.f_locals.get("instances") if frame is not None else None
    except (ValueError, AttributeError):  # a stack shallower than expected
        return None
    finally:
        frame = None  # no reference cycle through the frame
    return instances if isinstance(instances, list) else None


# ----------------------------------------------------------------------------------------------- request-loop


def _instance_list(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    first, last = value[0], value[-1]
    return all(type(x).__name__ == "Instance" and hasattr(x, "args") for x in (first, last))


def collator_order(collator: Any) -> list[tuple]:
    """The order ``Collator.get_batched`` yields: group by group (insertion order), each sorted by ``fn``."""
    groups = list(collator.arr_with_indices.values()) if collator.grouping else [collator.arr_with_indices]
    out: list[tuple] = []
    for group in groups:
        out.extend(args for _, args in sorted(group, key=lambda item: collator.fn(item[1])))
    return out


def fingerprint(source: Any) -> tuple:
    """Identifies an order source (a Collator or a request list) cheaply: a new loop gives a new one."""
    items = source if isinstance(source, list) else list(getattr(source, "arr_with_indices", []) or [])
    return (id(source), len(items), tuple(x if isinstance(x, int) else id(x) for x in items[:16]))


def _args_in_order(requests: Sequence[Any], order: Iterable[int]) -> list[tuple]:
    return [requests[i].args for i in order]


def source_in_frame(local: Mapping[str, Any]) -> tuple[Any, Callable[[], list[tuple]]] | None:
    """(the object that fixes the order, a function giving the request argument tuples in call
    order) from one frame's locals, or None. The order is built only when needed."""
    for value in local.values():
        if type(value).__name__ == "Collator" and hasattr(value, "arr_with_indices") and hasattr(value, "fn"):
            return value, functools.partial(collator_order, value)
    dispatch = local.get("dispatch_order")
    for name, value in local.items():
        if _instance_list(value):
            if isinstance(dispatch, list) and len(dispatch) == len(value) and name != "dispatch_order":
                return dispatch, functools.partial(_args_in_order, value, dispatch)  # the openai class's order
            return value, functools.partial(_args_in_order, value, range(len(value)))
    return None


def _stacks(skip: int) -> Iterable[Any]:
    """Frames of this thread (innermost first, ``skip`` of ours left out), then of the other threads
    (vLLM's class calls hooks from a pool)."""
    me = threading.get_ident()
    try:
        frame = sys._getframe(skip)
    except ValueError:
        frame = None
    while frame is not None:
        yield frame
        frame = frame.f_back
    for ident, top in sys._current_frames().items():
        frame = top if ident != me else None
        while frame is not None:
            yield frame
            frame = frame.f_back


def find_request_loop() -> tuple[Any, Mapping[str, Any], Callable[[], list[tuple]]] | None:
    """The model's request loop on the stack: (order source, the model's task_dict, order function), or None."""
    if not compat.available("request-loop"):
        return None
    # skip: _stacks, this function and its caller (the prefetch layer)
    for frame in _stacks(3):
        local = frame.f_locals
        task_dict = getattr(local.get("self"), "task_dict", None)
        if not isinstance(task_dict, Mapping):  # every lmms-eval model keeps the docs in self.task_dict
            continue
        found = source_in_frame(local)
        if found is not None:
            return found[0], task_dict, found[1]
    return None
