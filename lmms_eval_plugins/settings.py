"""Settings read from the environment, read one way everywhere: numbers, off-switches, the cache root.

Each caller decides what a bad value costs (a named error, or a warning and the default); this module
only says whether the value is one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

CACHE_ENV = "LMMS_EVAL_PLUGINS_CACHE"
OFF_VALUES = frozenset({"off", "0", "false", "no", "none"})


def cache_root() -> Path:
    """Where the plugin keeps downloads and caches: ``LMMS_EVAL_PLUGINS_CACHE``, else ``~/.cache/lmms_eval_plugins``."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "lmms_eval_plugins").expanduser()


def switched_off(name: str) -> bool:
    """``name`` holds one of :data:`OFF_VALUES` (case-insensitive)."""
    return os.environ.get(name, "").strip().lower() in OFF_VALUES


class BadSetting(ValueError):
    """An environment variable that does not hold the number it should."""


def env_number(
    name: str,
    default: float,
    *,
    whole: bool = False,
    minimum: float | None = None,
    clamp: bool = False,
    env: Mapping[str, str] | None = None,
) -> float:
    """The number in ``name`` (of ``env``, default ``os.environ``), ``default`` when unset or blank.

    Not a finite number (not a whole one with ``whole``): :class:`BadSetting`, so ``nan`` and ``inf`` are
    refused everywhere. Below ``minimum``: raised to it with ``clamp``, else :class:`BadSetting`.
    """
    raw = str((os.environ if env is None else env).get(name) or "").strip()
    if not raw:
        return default
    kind = "whole number" if whole else "number"
    try:
        value: float = int(raw) if whole else float(raw)
    except ValueError:
        raise BadSetting(f"{name}={raw!r} is not a {kind}") from None
    if not math.isfinite(value):
        raise BadSetting(f"{name}={raw!r} is not a finite {kind}")
    if minimum is not None and value < minimum:
        if not clamp:
            raise BadSetting(f"{name}={raw!r} is below {minimum:g}")
        value = type(value)(minimum)
    return value
