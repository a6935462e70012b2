"""CausalStep's protocol: the requests a video expands into, and the paper's Algorithm 1 replayed.

The chain asks the next question only after a correct answer, so every input it can ask is known in
advance: the task asks all of them as independent, batchable requests, and :func:`replay_chain`
replays Algorithm 1 afterwards from per-request correctness. Under greedy decoding that gives
exactly the answers a sequential run would get, with any model class (lmms-eval's ``qwen2_5_vl``
chat class has no multi-round generation) and full batching. Pure: no lmms-eval, no I/O.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

# The three questions Algorithm 1 can ask at a segment. A causal question's input depends on the
# step before it (the previous answer shown with it), so the two variants are different requests.
DESC = "desc"  # descriptive question of S(i), shown S(i)
CAUSAL_AFTER_DESC = "causal_after_desc"  # causal question of S(i), shown S(i-1), S(i) and the desc answer of S(i-1)
CAUSAL_AFTER_CAUSAL = "causal_after_causal"  # same, with the causal answer of S(i-1) (i >= 3)
# Asked outside the chain, for ICRA: the causal question of S(i) shown S(i) only, no history (i >= 2).
ISOLATED = "causal_isolated"

ChainKind = Literal["desc", "causal_after_desc", "causal_after_causal"]
Restart = Literal["next", "same"]
RESTART_RULES: tuple[str, ...] = ("next", "same")
ID_FIELD = "request_id"  # the doc and item field naming a request: request_id(video, segment, kind)


def request_id(video_id: str, segment: int, kind: str) -> str:
    return f"{video_id}/S{segment}/{kind}"


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
                {
                    "segment": s.segment,
                    "kind": s.kind,
                    "correct": s.correct,
                    "chain_length": s.chain_length,
                    "score": s.score,
                }
                for s in self.steps
            ],
        }


def replay_chain(
    n_segments: int, is_correct: Callable[[str, int], bool], restart: Restart | str = "next"
) -> ChainReplay:
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
