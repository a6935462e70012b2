"""CausalStep's typed request record: what one doc carries, built once by the loader (tasks.py
``build_requests``) and read back by prompts and scoring through :func:`record_of`.

A doc travels through lmms-eval as a row of a Hugging Face dataset, so :meth:`Request.columns` writes
Arrow-native values (lists, and ``shown`` as a list of ``{index, start, end}`` structs), never JSON text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lmms_eval_plugins.benchmarks.causalstep.protocol import ID_FIELD
from lmms_eval_plugins.errors import DataError


@dataclass(frozen=True)
class Segment:
    """One segment a request shows: its 1-based number and its interval in seconds."""

    index: int
    start: float
    end: float


@dataclass(frozen=True)
class Request:
    """One request of the protocol (one doc); ``options`` in evaluation order, ``gold`` their letter."""

    request_id: str
    video_id: str
    category: str
    video_path: str
    n_segments: int
    segment: int
    kind: str
    shown: tuple[Segment, ...]
    question: str
    options: tuple[str, ...]
    gold: str
    prev_question: str  # "" for a request without history
    prev_answer: str
    restart: str
    num_frames: int
    max_long_side: int  # 0: no resizing

    def columns(self) -> dict[str, Any]:
        """The doc's columns, in this order (Arrow-native values)."""
        return {
            ID_FIELD: self.request_id,
            "video_id": self.video_id,
            "category": self.category,
            "video_path": self.video_path,
            "n_segments": self.n_segments,
            "segment": self.segment,
            "kind": self.kind,
            "shown": [{"index": s.index, "start": s.start, "end": s.end} for s in self.shown],
            "question": self.question,
            "options": list(self.options),
            "gold": self.gold,
            "prev_question": self.prev_question,
            "prev_answer": self.prev_answer,
            "restart": self.restart,
            "num_frames": self.num_frames,
            "max_long_side": self.max_long_side,
        }


def record_of(doc: Mapping[str, Any]) -> Request:
    """The typed request a doc carries (what :meth:`Request.columns` wrote, as lmms-eval hands it back)."""
    try:
        return Request(
            request_id=str(doc[ID_FIELD]),
            video_id=str(doc["video_id"]),
            category=str(doc["category"]),
            video_path=str(doc["video_path"]),
            n_segments=int(doc["n_segments"]),
            segment=int(doc["segment"]),
            kind=str(doc["kind"]),
            shown=tuple(Segment(int(s["index"]), float(s["start"]), float(s["end"])) for s in doc["shown"]),
            question=str(doc["question"]),
            options=tuple(str(o) for o in doc["options"]),
            gold=str(doc["gold"]),
            prev_question=str(doc["prev_question"] or ""),
            prev_answer=str(doc["prev_answer"] or ""),
            restart=str(doc["restart"]),
            num_frames=int(doc["num_frames"]),
            max_long_side=int(doc["max_long_side"] or 0),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(
            f"a CausalStep doc lacks or garbles a field ({type(exc).__name__}: {exc})",
            record=str(doc.get(ID_FIELD, "?")),
            fix="build docs with causalstep's process_docs (tasks.build_requests)",
        ) from exc
