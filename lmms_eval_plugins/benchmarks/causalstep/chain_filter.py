"""A filter that replays a protocol once per group of requests, for the logs (CausalStep's chains).

lmms-eval hands a filter every response of a task at once: :class:`GroupReplayFilter` groups the
(response, doc) pairs by a doc key (the video) and calls a replay function once per group, attaching
the group-level result to the filtered responses so ``process_results`` can log it
(:func:`unpack_filtered`). The metrics never depend on it (see the class's docstring).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from lmms_eval.api.filter import Filter

from lmms_eval_plugins.filtered import FilteredDict

GroupReplayFn = Callable[[Sequence[Mapping[str, Any]], Sequence[str]], Any]


class GroupAttachment(FilteredDict):
    """The group-level part of a filtered response: a plain JSON-serialisable dict that survives
    lmms-eval's handling of filtered responses (``.strip()`` returns it, ``str()`` is JSON: see
    :mod:`lmms_eval_plugins.filtered`)."""


class GroupReplayFilter(Filter):
    """An lmms-eval filter that replays a protocol once per group of docs.

    lmms-eval calls ``apply(resps, docs)`` once per task, after generation and before
    ``process_results``, with every instance's responses (a list per doc) and the task's docs.
    This filter:

    1. takes each doc's first response (as lmms-eval's default ``take_first`` does);
    2. groups the (doc, response) pairs by ``doc[key]`` (docs without the key form no group);
    3. calls ``replay(group_docs, group_responses)`` once per group, in doc order; its return value
       must be JSON-serialisable;
    4. returns, for every doc, ``[text, GroupAttachment({"group": key, "ref": doc[id_field],
       "result": ..., "result_on": ref of the holder})]``: the group's first doc (in doc order) is
       the holder and carries the full ``result``; the other docs carry ``result: None`` and a
       reference to the holder (``result_on``). ``process_results`` then receives ``[text,
       attachment]`` (the text after lmms-eval's reasoning-tag stripping) and reads it with
       :func:`unpack_filtered`; the logged sample's ``filtered_resps`` shows both.

    Alignment: lmms-eval hands the filter the responses of its *instances* and the full list of
    docs; they line up index by index for a plain run and for ``--limit`` (a prefix of the docs).
    They do not with several data-parallel ranks (each rank holds every W-th doc: the filter then
    attaches no result) or with ``--offset`` (which the filter cannot see: the ``ref`` field lets
    ``process_results`` detect it, as ``unpack_filtered(..., doc=, id_field=)`` drops an attachment
    whose ref is not the doc's own, so a wrong attachment is never logged). Metrics should therefore
    be computed in the aggregation, which sees every doc's item from every rank, with the same
    replay function (this is what CausalStep does); the filter's result is for the logs.

    Use from a task YAML (the task's ``utils.py`` defines a subclass or a factory fixing ``key`` and
    ``replay``; extra YAML keys are passed to it as keyword arguments)::

        filter_list:
          - name: none
            filter:
              - function: !function utils.ChainReplayFilter
    """

    def __init__(self, key: str, replay: GroupReplayFn, id_field: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.key = key
        self.replay = replay
        self.id_field = id_field

    def _ref(self, doc: Mapping[str, Any], index: int) -> Any:
        return doc.get(self.id_field, index) if self.id_field else index

    def apply(self, resps: Sequence[Any], docs: Sequence[Mapping[str, Any]] | None) -> list[list[Any]]:
        texts = [_first_text(r) for r in resps]
        attachments = [GroupAttachment(group=None, ref=None, result=None, result_on=None) for _ in texts]
        if docs is not None and not _distributed():  # several ranks: groups incomplete and misaligned
            doc_list = [dict(d) for _, d in zip(texts, docs)]
            groups: dict[Hashable, list[int]] = {}
            for index, doc in enumerate(doc_list):
                attachments[index]["ref"] = self._ref(doc, index)
                group = doc.get(self.key)
                if group is not None:
                    groups.setdefault(group, []).append(index)
            for group, members in groups.items():
                result = self.replay([doc_list[i] for i in members], [texts[i] for i in members])
                holder = attachments[members[0]]["ref"]
                for i in members:
                    attachments[i]["group"] = group
                    attachments[i]["result_on"] = holder
                attachments[members[0]]["result"] = result
        return [[text, attachment] for text, attachment in zip(texts, attachments)]


def _first_text(resp: Any) -> str:
    """The first response of an instance (lmms-eval's ``take_first``), as a string."""
    if isinstance(resp, (list, tuple)):
        resp = resp[0] if resp else ""
    if isinstance(resp, str):
        return resp
    text = getattr(resp, "text", None)  # a GenerationResult, should one slip through unwrapped
    return text if isinstance(text, str) else ("" if resp is None else str(resp))


def _distributed() -> bool:
    """Whether this process is one of several data-parallel ranks."""
    try:
        if int(os.environ.get("WORLD_SIZE", "1") or 1) > 1:
            return True
    except ValueError:
        pass
    try:
        import torch.distributed as dist

        return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
    except Exception:  # noqa: BLE001 -- no torch, or a backend that cannot answer: assume one process
        return False


def unpack_filtered(
    results: Any, *, doc: Mapping[str, Any] | None = None, id_field: str | None = None
) -> tuple[str, dict[str, Any] | None]:
    """``(response text, group attachment or None)`` from the ``results`` ``process_results`` got.

    ``results`` is ``[text, GroupAttachment]`` after :class:`GroupReplayFilter` (also accepted
    nested one level deeper, as the evaluator hands it to the task), or ``[text]`` / a string when
    the task ran without it. With ``doc`` and ``id_field``, an attachment made for another doc
    (misaligned responses, see the filter's docstring) is dropped; the text is always the doc's own.
    """
    if isinstance(results, (list, tuple)) and len(results) == 1 and isinstance(results[0], (list, tuple)):
        results = results[0]
    if not isinstance(results, (list, tuple)):
        return _first_text(results), None
    text = _first_text(results[0] if results else "")
    attachment = next((r for r in results[1:] if isinstance(r, Mapping)), None)
    if (
        attachment is not None
        and doc is not None
        and id_field is not None
        and attachment.get("ref") != doc.get(id_field)
    ):
        attachment = None
    return text, (dict(attachment) if attachment is not None else None)
