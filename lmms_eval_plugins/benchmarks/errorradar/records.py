"""ErrorRadar's typed record: what one doc carries, built once by the loader (tasks.py
``process_docs_*``, from ``normalize_record``'s fields) and read back by prompts and scoring through
:func:`record_of`, the one reader of a doc's fields. Every column is a plain string or integer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from lmms_eval_plugins.doc_fields import ROUND_FIELD
from lmms_eval_plugins.errors import DataError

# Every doc carries how many rounds its task asks: process_results fills the `*_std` metrics only when > 1.
ROUNDS_FIELD = "n_rounds"


@dataclass(frozen=True)
class Record:
    """One ErrorRadar question in one round. ``n_steps`` bounds a valid predicted step; ``gold_category``
    is a category code (VIS, CAL, REAS, KNOW, MIS); ``round`` is 0-based, of ``n_rounds``."""

    question_id: str
    study_level: str
    question_type: str
    content: str
    answer: str
    user_answer: str
    user_answer_steps: str
    n_steps: int
    gold_step: int
    gold_category: str
    content_image: str
    image_path: str
    n_rounds: int = 1
    round: int = 0

    @classmethod
    def of(cls, record: Mapping[str, Any], *, n_rounds: int) -> Record:
        """From a loaded record (``normalize_record`` with its ``image_path``), for a task of ``n_rounds``."""
        return cls(**{f.name: record[f.name] for f in _RECORD_FIELDS}, n_rounds=n_rounds)

    def columns(self) -> dict[str, Any]:
        """The doc's columns: the record's fields and ``n_rounds`` (``doc_fields.with_rounds`` adds ``round``)."""
        return {**{f.name: getattr(self, f.name) for f in _RECORD_FIELDS}, ROUNDS_FIELD: self.n_rounds}


_RECORD_FIELDS = tuple(f for f in fields(Record) if f.name not in (ROUNDS_FIELD, ROUND_FIELD))
_INTEGERS = ("n_steps", "gold_step")


def record_of(doc: Mapping[str, Any]) -> Record:
    """The typed record a doc carries (what :meth:`Record.columns` wrote, as lmms-eval hands it back)."""
    missing = [f.name for f in _RECORD_FIELDS if f.name not in doc]
    if missing:
        raise DataError(
            f"an ErrorRadar doc lacks the field(s) {', '.join(missing)}",
            record=str(doc.get("question_id", "?")),
            fix="build docs with errorradar's process_docs_step / process_docs_cate",
        )
    values = {
        f.name: int(doc[f.name]) if f.name in _INTEGERS else str(doc[f.name] if doc[f.name] is not None else "")
        for f in _RECORD_FIELDS
    }
    return Record(**values, n_rounds=int(doc.get(ROUNDS_FIELD) or 1), round=int(doc.get(ROUND_FIELD) or 0))
