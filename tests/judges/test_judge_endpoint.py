"""Where judge traffic goes: endpoint resolution, the OPENAI_API_BASE refusal, the announcement line."""

from __future__ import annotations

import pytest
from judge_server import TEST_API_KEY as API_KEY
from lmms_eval.filters import build_filter_ensemble
from lmms_eval_plugins.judges import JudgeConfigError, JudgeFilter
from lmms_eval_plugins.judges.session import announce_judge
from lmms_eval_plugins.judges.endpoint import (
    DEFAULT_OPENAI_BASE_URL,
    Endpoint,
    announcement,
    endpoint_from_env,
    endpoint_host,
    resolve_endpoint,
)
from loguru import logger

from lmms_eval_plugins.errors import PluginError

SECRET = "sk-in-the-url-0123456789"


@pytest.fixture
def log_lines():
    captured: list[str] = []
    sink = logger.add(lambda msg: captured.append(str(msg)), level="DEBUG", format="{message}")
    yield captured
    logger.remove(sink)


def announcements(lines: list[str]) -> list[str]:
    return [line.strip() for line in lines if line.startswith("lmms-eval-plugins judge:")]


# ---- resolution --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "url", "source"),
    [
        ({"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1/"}, "http://127.0.0.1:8000/v1", "OPENAI_BASE_URL"),
        ({"OPENAI_API_URL": "http://h:1/v1/chat/completions"}, "http://h:1/v1", "OPENAI_API_URL"),
        ({"OPENAI_BASE_URL": "http://a/v1", "OPENAI_API_URL": "http://b/v1"}, "http://a/v1", "OPENAI_BASE_URL"),
        ({"OPENAI_API_KEY": "k"}, DEFAULT_OPENAI_BASE_URL, "OPENAI_API_KEY"),
        # OPENAI_API_BASE next to a judge URL: the judge URL wins, OPENAI_API_BASE is not read
        (
            {"OPENAI_API_BASE": "http://model-under-test:9000/v1", "OPENAI_BASE_URL": "http://judge:8000/v1"},
            "http://judge:8000/v1",
            "OPENAI_BASE_URL",
        ),
        (
            {"OPENAI_API_BASE": "http://model-under-test:9000/v1", "OPENAI_API_URL": "http://judge:8000/v1"},
            "http://judge:8000/v1",
            "OPENAI_API_URL",
        ),
    ],
)
def test_resolution_order(env, url, source):
    endpoint = resolve_endpoint("semantic_match", env)
    assert (endpoint.base_url, endpoint.source) == (url, source)


@pytest.mark.parametrize("with_key", [False, True])
def test_openai_api_base_alone_is_refused(with_key):
    env = {"OPENAI_API_BASE": f"http://user:{SECRET}@vllm.local:8001/v1?token={SECRET}"}
    if with_key:  # without the refusal this would silently judge at the public endpoint
        env["OPENAI_API_KEY"] = API_KEY
    with pytest.raises(JudgeConfigError) as err:
        resolve_endpoint("semantic_match", env)
    message = str(err.value)
    assert isinstance(err.value, PluginError)
    assert "OPENAI_API_BASE is read by lmms-eval's model class" in message
    assert "not by the judge" in message
    assert "Set OPENAI_BASE_URL to the judge's endpoint (it may be the same URL" in message
    assert "LMMS_EVAL_PLUGINS_JUDGE=offline" in message and "semantic_match_offline" in message
    assert "http://vllm.local:8001" in message  # where it points, host only
    assert SECRET not in message and API_KEY not in message and "user" not in message
    # a blank OPENAI_API_BASE is not set
    assert resolve_endpoint("rubric", {"OPENAI_API_BASE": "  ", "OPENAI_API_KEY": "k"}).source == "OPENAI_API_KEY"


def test_nothing_set_is_the_missing_endpoint_error():
    with pytest.raises(JudgeConfigError, match="none is configured"):
        resolve_endpoint("semantic_match", {})
    assert endpoint_from_env({}) is None


@pytest.mark.parametrize("url", ["localhost:8000/v1", "ftp://h/v1", "http://h:port/v1", "/v1", f"{SECRET}@"])
def test_a_url_that_is_not_http_is_refused_without_echoing_it(url):
    with pytest.raises(JudgeConfigError, match="OPENAI_BASE_URL is not an http") as err:
        resolve_endpoint("semantic_match", {"OPENAI_BASE_URL": url})
    assert SECRET not in str(err.value)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000"),
        (f"https://user:{SECRET}@Judge.Example.com/v1", "https://judge.example.com"),
        (f"https://{SECRET}@host:443/openai/deployments/{SECRET}/x?api-key={SECRET}#{SECRET}", "https://host:443"),
        ("http://[::1]:8000/v1", "http://[::1]:8000"),
        ("http://h:notaport/v1", "<unparseable URL>"),
        (f"{SECRET}", "<unparseable URL>"),
        ("", "<unparseable URL>"),
    ],
)
def test_endpoint_host_is_scheme_host_port_only(url, host):
    assert endpoint_host(url) == host


# ---- the announcement ----------------------------------------------------------------------------


def test_announcement_format():
    ep = Endpoint("http://127.0.0.1:8000/v1", "EMPTY", source="OPENAI_BASE_URL")
    assert announcement("semantic_match", "1", "gpt-4o", ep) == (
        "lmms-eval-plugins judge: semantic_match v1 -> model gpt-4o at http://127.0.0.1:8000 (from OPENAI_BASE_URL)"
    )
    default = resolve_endpoint("rubric", {"OPENAI_API_KEY": "k"})
    assert announcement("rubric", "1", "gpt-4.1", default) == (
        f"lmms-eval-plugins judge: rubric v1 -> model gpt-4.1 at {DEFAULT_OPENAI_BASE_URL.removesuffix('/v1')} "
        "(default: OPENAI_API_KEY set, no OPENAI_BASE_URL)"
    )
    assert (
        announcement("rubric_offline", "1", None, None)
        == "lmms-eval-plugins judge: rubric_offline v1 -> offline (no endpoint)"
    )
    assert (
        announcement("custom", "", "m", Endpoint("http://h/v1", "k"))
        == "lmms-eval-plugins judge: custom -> model m at http://h (given directly)"
    )


def test_announcement_never_shows_credentials(monkeypatch, log_lines):
    url = f"https://judge.example.com:8443/v1/{SECRET}?api-version={SECRET}"  # a key-named parameter is refused (below)
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    build_filter_ensemble("none", [[JudgeFilter, {"judge": "semantic_match", "default_model": "gpt-4o"}]])
    (line,) = announcements(log_lines)
    assert line == (
        "lmms-eval-plugins judge: semantic_match v1 -> model gpt-4o at https://judge.example.com:8443 (from OPENAI_BASE_URL)"
    )
    for text in log_lines:
        assert SECRET not in text and API_KEY not in text


@pytest.mark.parametrize(
    "url",
    [
        f"https://user:{SECRET}@judge.example.com:8443/v1",
        f"https://{SECRET}@judge.example.com/v1",
        f"http://:{SECRET}@127.0.0.1:8000/v1",
        f"https://judge.example.com:8443/v1?key={SECRET}",
        f"https://judge.example.com/v1?api-version=1&X-Api-Key={SECRET}",
        f"https://judge.example.com/v1?v={API_KEY}",
    ],
)
def test_credentials_inside_the_url_are_refused_by_construction(monkeypatch, log_lines, url):
    """A key inside the URL would go out as Basic auth and sit in every place the URL is shown or stored:
    such an endpoint is never built, and the refusal names only the host."""
    import base64
    from urllib.parse import quote

    monkeypatch.setenv("OPENAI_BASE_URL", url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with pytest.raises(JudgeConfigError, match="holds (credentials|a credential in its query string)") as err:
        resolve_endpoint("semantic_match")
    with pytest.raises(JudgeConfigError):
        Endpoint(url, API_KEY)
    built = build_filter_ensemble("none", [[JudgeFilter, {"judge": "semantic_match", "default_model": "gpt-4o"}]])
    assert "holds credentials" in built.filters[0].unavailable or "holds a credential" in built.filters[0].unavailable
    forms = {
        SECRET,
        quote(SECRET),
        base64.b64encode(f"user:{SECRET}".encode()).decode(),
        base64.b64encode(f":{SECRET}".encode()).decode(),
        API_KEY,
    }
    for text in [str(err.value), built.filters[0].unavailable, *log_lines]:
        assert not any(form in text for form in forms)


def test_announced_once_per_judge_model_and_endpoint_at_task_build(endpoint_env, monkeypatch, log_lines):
    spec = {"judge": "semantic_match", "default_model": "gpt-4o"}
    build_filter_ensemble("none", [[JudgeFilter, spec]])
    build_filter_ensemble("none", [[JudgeFilter, spec]])  # a second task with the same judge: no new line
    host = endpoint_env.base_url.rsplit("/v1", 1)[0]
    assert announcements(log_lines) == [
        f"lmms-eval-plugins judge: semantic_match v1 -> model gpt-4o at {host} (from OPENAI_BASE_URL)"
    ]
    assert endpoint_env.n_requests == 0  # announced before anything is judged
    build_filter_ensemble("none", [[JudgeFilter, {**spec, "default_model": "gpt-4.1"}]])  # another model: announced
    build_filter_ensemble("none", [[JudgeFilter, {**spec, "judge": "rubric"}]])  # another judge: announced
    assert len(announcements(log_lines)) == 3
    assert not announce_judge("rubric", "1", "gpt-4o", Endpoint(endpoint_env.base_url, "k", "OPENAI_BASE_URL"))


def test_offline_judge_is_announced_as_offline(monkeypatch, log_lines):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_JUDGE", "offline")
    monkeypatch.setenv("OPENAI_API_BASE", "http://model-under-test:9000/v1")  # irrelevant offline
    build_filter_ensemble("none", [[JudgeFilter, {"judge": "rubric"}]])
    assert announcements(log_lines) == ["lmms-eval-plugins judge: rubric_offline v1 -> offline (no endpoint)"]


def test_openai_api_base_alone_sends_nothing_to_it(server, monkeypatch, log_lines):
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    built = build_filter_ensemble("none", [[JudgeFilter, {"judge": "semantic_match", "default_model": "gpt-4o"}]])
    assert "OPENAI_API_BASE is read by lmms-eval's model class" in built.filters[0].unavailable
    assert announcements(log_lines) == []
    assert server.n_requests == 0
