"""Checks on the docs a task's ``process_docs`` builds: no column carries JSON text (issue 28, typed records)."""

from __future__ import annotations

import json
from typing import Any


def _json_container(value: Any) -> bool:
    if not isinstance(value, str) or value.strip()[:1] not in ("[", "{"):
        return False
    try:
        return isinstance(json.loads(value), (list, dict))
    except ValueError:
        return False


def json_text_columns(dataset: Any) -> dict[str, str]:
    """{column: the first value} for every column of ``dataset`` (a ``datasets.Dataset`` or a list of docs)
    holding a string, or a list of strings, that JSON-parses to a list or an object."""
    found: dict[str, str] = {}
    for doc in dataset:
        for column, value in doc.items():
            values = value if isinstance(value, list) else [value]
            hit = next((v for v in values if _json_container(v)), None)
            if hit is not None and column not in found:
                found[column] = hit
    return found
