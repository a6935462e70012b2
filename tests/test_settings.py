"""One reader for settings from the environment (lmms_eval_plugins/settings.py) and what its callers make of bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from lmms_eval_plugins import data, frame_cache, media, prefetch, stats
from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.settings import CACHE_ENV, BadSetting, cache_root, env_number, switched_off

NAME = "LMMS_EVAL_PLUGINS_TEST_SETTING"


@pytest.mark.parametrize(
    "raw, kwargs, expected",
    [
        (None, {}, 7.0),
        ("  ", {}, 7.0),
        ("2.5", {}, 2.5),
        (" 3 ", {"whole": True}, 3),
        ("-4", {"minimum": 0, "clamp": True}, 0.0),
        ("-4", {"whole": True, "minimum": 1, "clamp": True}, 1),
        ("1e3", {}, 1000.0),
    ],
)
def test_numbers(monkeypatch, raw, kwargs, expected):
    if raw is None:
        monkeypatch.delenv(NAME, raising=False)
    else:
        monkeypatch.setenv(NAME, raw)
    value = env_number(NAME, 7.0, **kwargs)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize(
    "raw, kwargs, words",
    [
        ("soon", {}, "is not a number"),
        ("1.5", {"whole": True}, "is not a whole number"),
        ("inf", {}, "is not a finite number"),
        ("nan", {}, "is not a finite number"),
        ("-1", {"minimum": 0}, "is below 0"),
    ],
)
def test_bad_numbers_name_the_variable_and_the_value(monkeypatch, raw, kwargs, words):
    monkeypatch.setenv(NAME, raw)
    with pytest.raises(BadSetting, match=f"{NAME}='{raw}' {words}"):
        env_number(NAME, 7.0, **kwargs)


def test_switches_and_the_cache_root(monkeypatch):
    for raw in ("off", "OFF", " 0 ", "false", "no", "none"):
        monkeypatch.setenv(NAME, raw)
        assert switched_off(NAME)
    for raw in ("", "1", "on", "/some/folder"):
        monkeypatch.setenv(NAME, raw)
        assert not switched_off(NAME)
    monkeypatch.setenv(CACHE_ENV, "~/plugin-cache")
    monkeypatch.delenv(frame_cache.FRAME_CACHE_ENV, raising=False)  # the suite's private frame cache
    assert cache_root() == Path.home() / "plugin-cache"
    assert frame_cache.cache_folder() == cache_root() / "frames"
    monkeypatch.delenv(CACHE_ENV)
    assert cache_root() == Path.home() / ".cache" / "lmms_eval_plugins"


def test_each_caller_keeps_its_own_price_for_a_bad_value(monkeypatch):
    # a download setting or the image-size limit stops the run with a named error
    monkeypatch.setenv(data.DOWNLOAD_TIMEOUT_ENV, "inf")
    with pytest.raises(DataError, match="is not a valid setting"):
        data.download_settings()
    monkeypatch.setenv(media.MAX_PIXELS_ENV, "lots")
    with pytest.raises(MediaError, match="is not a whole number"):
        media.max_image_pixels()
    monkeypatch.setenv(stats.BOOTSTRAP_ENV, "-5")
    assert stats.bootstrap_iterations() == 0  # negative: off
    # a cache or decode-ahead setting only costs its speed-up: a warning and the default
    monkeypatch.setenv(frame_cache.FRAME_CACHE_MB_ENV, "nan")
    assert frame_cache.cap_bytes() == frame_cache.DEFAULT_CAP_MB * 1_000_000  # was a crash (int(nan))
    monkeypatch.setenv(prefetch.PREFETCH_MB_ENV, "inf")
    assert prefetch.settings()["budget_mb"] == prefetch.DEFAULT_MB  # was a crash (int(inf))
