"""Replaying dependent multi-step protocols at scoring time.

Some benchmarks ask a model a sequence of questions where the next question depends on whether
the previous answer was right (CausalStep's reasoning chain, MMErroR's two-stage EPD). When every
input the protocol can ask is known in advance, the task requests all of them as independent,
batchable requests and this module replays the protocol afterwards from per-request correctness.
Under greedy decoding that gives exactly the answers a sequential run would get, with any model
class (lmms-eval's ``qwen2_5_vl`` chat class has no multi-round generation) and full batching.

Two parts:

- :func:`replay_chain`: a pure replay of CausalStep's Algorithm 1 (with the prose's restart rule as
  an option), from a correctness oracle ``is_correct(kind, segment)``.
- :class:`GroupReplayFilter`: a generic lmms-eval filter that groups the (response, doc) pairs of a
  task by a doc key (e.g. the video) and calls a task-provided function once per group, attaching
  the group-level result to the filtered responses so ``process_results`` can log it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from lmms_eval.api.filter import Filter

from lmms_eval_plugins.filtered import FilteredDict

__all__ = [
    "CAUSAL_AFTER_CAUSAL",
    "CAUSAL_AFTER_DESC",
    "DESC",
    "RESTART_RULES",
    "ChainReplay",
    "ChainStep",
    "GroupAttachment",
    "GroupReplayFilter",
    "replay_chain",
    "unpack_filtered",
]

# The three questions Algorithm 1 can ask at a segment. A causal question's input depends on the
# step before it (the previous answer shown with it), so the two variants are different requests.
DESC = "desc"  # descriptive question of S(i), shown S(i)
CAUSAL_AFTER_DESC = "causal_after_desc"  # causal question of S(i), shown S(i-1), S(i) and the desc answer of S(i-1)
CAUSAL_AFTER_CAUSAL = "causal_after_causal"  # same, with the causal answer of S(i-1) (i >= 3)

ChainKind = Literal["desc", "causal_after_desc", "causal_after_causal"]
Restart = Literal["next", "same"]
RESTART_RULES: tuple[str, ...] = ("next", "same")


@dataclass(frozen=True)
class ChainStep:
    """One question asked by the replay, with the chain state right after its answer."""

    segment: int  # 1-based
    kind: str  # DESC, CAUSAL_AFTER_DESC or CAUSAL_AFTER_CAUSAL
    correct: bool
    chain_length: int  # questions answered correctly in a row, after this answer
    score: int  # running score, after this answer


@dataclass(frozen=True)
class ChainReplay:
    n_segments: int
    restart: str
    steps: tuple[ChainStep, ...]

    @property
    def score(self) -> int:
        return self.steps[-1].score if self.steps else 0

    @property
    def longest_chain(self) -> int:
        return max((s.chain_length for s in self.steps), default=0)

    @property
    def restarts(self) -> int:
        """Wrong answers (each interrupts the chain), including one on the very last question."""
        return sum(1 for s in self.steps if not s.correct)

    @property
    def completed(self) -> bool:
        """The whole chain was answered without a wrong answer."""
        return bool(self.steps) and self.restarts == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "n_segments": self.n_segments,
            "restart": self.restart,
            "score": self.score,
            "longest_chain": self.longest_chain,
            "restarts": self.restarts,
            "completed": self.completed,
            "steps": [
                {"segment": s.segment, "kind": s.kind, "correct": s.correct, "chain_length": s.chain_length, "score": s.score}
                for s in self.steps
            ],
        }


def replay_chain(n_segments: int, is_correct: Callable[[str, int], bool], restart: Restart | str = "next") -> ChainReplay:
    """Replay CausalStep's Algorithm 1 over ``n_segments`` segments.

    ``is_correct(kind, segment)`` says whether the model's answer to that question is right; it is
    called once for each question the chain asks, in order, and never for the others.

    Rules (Algorithm 1): the chain starts with the descriptive question of S1. A correct answer adds
    1 to the chain length; a descriptive answer adds 1 to the score, a causal one adds the new chain
    length. After a correct answer at S(i) the next question is the causal question of S(i+1)
    (``causal_after_desc`` or ``causal_after_causal`` by the kind just answered). A wrong answer sets
    the chain length to 0 (a restart) and the next question is the descriptive question of:

    - ``restart="next"`` (Algorithm 1): S(i+1), whatever kind was answered wrong;
    - ``restart="same"`` (the paper's prose): S(i) after a wrong *causal* answer at S(i); S(i+1)
      after a wrong *descriptive* answer (the prose's rule for descriptive answers, and the only
      reading that terminates: the descriptive question of S(i) is never asked twice).

    The replay ends when the next question would be past S(N). Every transition moves forward in the
    order causal S(i) < desc S(i) < anything at S(i+1), so each question is asked at most once:
    at most N steps under "next" and 2N - 1 under "same". A perfect video scores N(N+1)/2.
    """
    if restart not in RESTART_RULES:
        raise ValueError(f"restart must be one of {', '.join(RESTART_RULES)}, got {restart!r}")
    if n_segments < 0:
        raise ValueError(f"n_segments must be >= 0, got {n_segments}")
    steps: list[ChainStep] = []
    score = chain = 0
    segment, kind = 1, DESC
    while segment <= n_segments:
        correct = bool(is_correct(kind, segment))
        if correct:
            chain += 1
            score += 1 if kind == DESC else chain
            following = (segment + 1, CAUSAL_AFTER_DESC if kind == DESC else CAUSAL_AFTER_CAUSAL)
        else:
            chain = 0
            following = (segment, DESC) if restart == "same" and kind != DESC else (segment + 1, DESC)
        steps.append(ChainStep(segment, kind, correct, chain, score))
        segment, kind = following
    return ChainReplay(n_segments, restart, tuple(steps))


# ------------------------------------------------------------------------------------------ filter

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


def unpack_filtered(results: Any, *, doc: Mapping[str, Any] | None = None,
                    id_field: str | None = None) -> tuple[str, dict[str, Any] | None]:
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
    if attachment is not None and doc is not None and id_field is not None and attachment.get("ref") != doc.get(id_field):
        attachment = None
    return text, (dict(attachment) if attachment is not None else None)
