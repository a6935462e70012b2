"""MMErroR's typed record: what one doc carries, built once by the loader (tasks.py ``etc_docs`` /
``epd_docs``, from ``normalize_record``'s fields) and read back by prompts and scoring through
:func:`record_of`, the one reader of a doc's fields. Every column is a plain string or integer."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from lmms_eval_plugins.benchmarks.mmerror.labels import OFFICIAL_NOT_ASKED_FIELD
from lmms_eval_plugins.errors import DataError


@dataclass(frozen=True)
class Record:
    """One MMErroR sample as a request sees it. ``stage``: EPD's stage (``presence`` or ``type``), None in
    ETC; ``official_not_asked``: ETC's count of E_NoError records left out (0 in EPD)."""

    question_id: str
    question: str
    correct_answer: str  # not part of any prompt; kept for the logs
    error_reason: str
    label: str  # the label name (labels.LABELS), as the official loader reads the data's spelling
    label_raw: str  # as the data spells it
    domain: str
    subdomain: str
    json_path: str
    image_path: str
    stage: str | None = None
    official_not_asked: int = 0

    @classmethod
    def of(cls, record: Mapping[str, Any], *, stage: str | None = None, official_not_asked: int = 0) -> Record:
        """From a loaded record (``normalize_record`` with its ``image_path``)."""
        return cls(
            **{f.name: record[f.name] for f in _SAMPLE_FIELDS}, stage=stage, official_not_asked=official_not_asked
        )

    def columns(self) -> dict[str, Any]:
        """The doc's columns: the sample's fields, then ``stage`` (EPD) or ``official_not_asked`` (ETC)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in _SAMPLE_FIELDS}
        if self.stage is not None:
            out["stage"] = self.stage
        else:
            out[OFFICIAL_NOT_ASKED_FIELD] = self.official_not_asked
        return out


_SAMPLE_FIELDS = tuple(f for f in fields(Record) if f.name not in ("stage", OFFICIAL_NOT_ASKED_FIELD))


def record_of(doc: Mapping[str, Any]) -> Record:
    """The typed record a doc carries (what :meth:`Record.columns` wrote, as lmms-eval hands it back)."""
    missing = [f.name for f in _SAMPLE_FIELDS if f.name not in doc]
    if missing:
        raise DataError(
            f"an MMErroR doc lacks the field(s) {', '.join(missing)}",
            record=str(doc.get("question_id", "?")),
            fix="build docs with mmerror's process_docs_etc / process_docs_epd",
        )
    return Record(
        **{f.name: str(doc[f.name] if doc[f.name] is not None else "") for f in _SAMPLE_FIELDS},
        stage=doc.get("stage") or None,
        official_not_asked=int(doc.get(OFFICIAL_NOT_ASKED_FIELD) or 0),
    )
