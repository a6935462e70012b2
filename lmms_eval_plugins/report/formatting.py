"""How the report prints numbers and dates: one function per metric unit, every date in UTC.

Units are the spec's (``Metric.unit``): percentages (0-100) with :data:`PERCENT_DECIMALS` decimals,
fractions (0-1) with :data:`FRACTION_DECIMALS`, counts as integers. A value whose unit is unknown (a
breakdown's entry, a task of no installed benchmark) follows its type: an int is a count, a float a
percentage. Standard errors, intervals and differences take their metric's unit.
"""

from __future__ import annotations

import datetime as _dt
import math
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

PERCENT_DECIMALS = 2
FRACTION_DECIMALS = 4
LMMS_EVAL_DATE = "%Y%m%d_%H%M%S"  # lmms-eval's ``get_datetime_str``
SHOWN_DATE = "%Y-%m-%d %H:%M:%S UTC"
UNITS_LINE = (
    f"percentages with {PERCENT_DECIMALS} decimals unless a count (an integer) "
    f"or a fraction ({FRACTION_DECIMALS} decimals)"
)


def fmt_percent(value: float) -> str:
    return f"{value:.{PERCENT_DECIMALS}f}"


def fmt_fraction(value: float) -> str:
    return f"{value:.{FRACTION_DECIMALS}f}"


def fmt_count(value: float) -> str:
    """An integer; a count that is not a whole number (an average) keeps the percent precision."""
    return str(int(value)) if float(value).is_integer() else fmt_percent(value)


UNIT_FORMATS = {"%": fmt_percent, "fraction": fmt_fraction, "count": fmt_count}


def fmt(value: Any, unit: str | None = None) -> str:
    """A metric value as every table prints it, by ``unit`` (None: by the value's type)."""
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if isinstance(value, (int, float)):
        if isinstance(value, int) and unit != "fraction":
            return str(value)  # an int is a count, whatever the spec calls it
        return UNIT_FORMATS.get(unit or "%", fmt_percent)(value)
    if isinstance(value, (list, tuple)) and not value:
        return "—"
    return str(value)


def fmt_ref(value: Any, decimals: int | None = None) -> str:
    """Paper numbers, printed as published (``decimals``: the paper's precision for that column)."""
    if value is None:
        return "—"
    if decimals is not None and isinstance(value, (int, float)):
        return f"{value:.{decimals}f}"
    return str(value)


def num(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return float(value)
    return None


def utc_text(moment: _dt.datetime) -> str:
    """An aware datetime as ``YYYY-MM-DD HH:MM:SS UTC``."""
    return moment.astimezone(_dt.timezone.utc).strftime(SHOWN_DATE)


def run_date_utc(date: str | None, zone: str) -> str:
    """lmms-eval's results ``date`` (``YYYYMMDD_HHMMSS`` in ``zone``) in UTC; as recorded, with its zone
    named, when it is in another format or the zone is unknown here."""
    if not date:
        return "N/A"
    try:
        moment = _dt.datetime.strptime(date, LMMS_EVAL_DATE).replace(tzinfo=ZoneInfo(zone))
    except (ValueError, ZoneInfoNotFoundError):
        return f"{date} ({zone})"
    return utc_text(moment)
