"""Judge failures counted by cause and host (issue 29): what the end-of-run block names, with its fix.

Real HTTP on 127.0.0.1 (a closed port, the loopback server answering 401); the cause of a connection
error is read from the exceptions inside it; a missing judge is announced once per process.
"""

from __future__ import annotations

import socket
import ssl

import pytest
from judge_server import TEST_API_KEY, client_error
from lmms_eval_plugins.judges import JudgeItem, load_judge
from lmms_eval_plugins.judges.accounting import connection_cause, judge_error_causes
from lmms_eval_plugins.judges.endpoint import Endpoint
from lmms_eval_plugins.judges.session import announce_unavailable
from lmms_eval_plugins.judges.runtime import JudgeRuntime
from loguru import logger


def _items(n: int) -> list[JudgeItem]:
    return [JudgeItem(question=f"Question {i}?", prediction="A", reference="A") for i in range(n)]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def runtime(tmp_path):
    return JudgeRuntime(tmp_path / "verdicts.sqlite3", seed=0)


def test_a_closed_port_is_counted_as_connection_refused_at_its_host(runtime, fast):
    port = _closed_port()
    url = f"http://127.0.0.1:{port}/v1/"  # host only in the counts: no path
    outs = runtime.judge_items(
        load_judge("semantic_match"),
        _items(3),
        model="judge-model",
        endpoint=Endpoint(url, TEST_API_KEY),
        settings=fast,
    )
    assert all(o.error for o in outs)
    report = runtime.report()
    assert report["judge_errors_by_cause"] == {f"http://127.0.0.1:{port}": {"connection refused": 3}}
    assert report["by_model"]["judge-model"]["judge_errors"] == 3  # the same samples, not the calls
    assert report["failures_by_reason"]["judge-model"] == {"connection refused": 3 * fast.max_attempts}
    assert TEST_API_KEY not in str(report["judge_errors_by_cause"])


def test_a_refused_key_is_counted_once_per_sample_as_http_401(server, runtime, fast):
    server.behaviour = lambda req: client_error(401)
    items = _items(4) + _items(1)  # the duplicate shares its original's cause
    runtime.judge_items(
        load_judge("semantic_match"),
        items,
        model="judge-model",
        endpoint=Endpoint(server.base_url, TEST_API_KEY),
        settings=fast,
    )
    assert runtime.report()["judge_errors_by_cause"] == {server.base_url.removesuffix("/v1"): {"HTTP 401": 5}}


def test_the_warning_names_each_cause_with_its_host(runtime, fast):
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="WARNING")
    try:
        port = _closed_port()
        runtime.judge_items(
            load_judge("semantic_match"),
            _items(2),
            model="m",
            endpoint=Endpoint(f"http://127.0.0.1:{port}/v1", "k"),
            settings=fast,
        )
    finally:
        logger.remove(sink)
    assert any(
        f"2 of 2 samples are judge errors (excluded from the metric, counted): 2 x connection refused at "
        f"http://127.0.0.1:{port}" in line
        for line in lines
    ), lines


def test_judge_error_causes_most_frequent_first():
    assert judge_error_causes({0: "HTTP 500", 1: "timeout after 60 s", 2: "HTTP 500"}, "https://h:1") == (
        "2 x HTTP 500 at https://h:1; 1 x timeout after 60 s at https://h:1"
    )


def _chained(inner: BaseException) -> BaseException:
    """What httpx/anyio raise around a socket error: an OSError group with the cause inside."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise OSError("All connection attempts failed") from exc
    except OSError as outer:
        wrapper = RuntimeError("Connection error.")
        wrapper.__cause__ = outer
        return wrapper


@pytest.mark.parametrize(
    "inner, cause",
    [
        (ConnectionRefusedError(111, "Connect call failed"), "connection refused"),
        (socket.gaierror(-2, "Name or service not known"), "host name not found"),
        (ssl.SSLError("certificate verify failed"), "TLS error"),
        (TimeoutError(), "connect timeout"),
        (OSError("network is unreachable"), "connection error"),
    ],
)
def test_connection_cause_reads_the_exceptions_inside(inner, cause):
    assert connection_cause(_chained(inner)) == cause
    assert connection_cause(ExceptionGroup("g", [ValueError("x"), _chained(inner)])) == cause  # noqa: F821 (3.11+)


def test_a_missing_judge_is_announced_once_per_process():
    lines: list[str] = []
    sink = logger.add(lambda m: lines.append(str(m)), level="ERROR")
    try:
        assert announce_unavailable("semantic_match", "no endpoint") is True
        assert announce_unavailable("semantic_match", "no endpoint") is False
        assert announce_unavailable("rubric", "no endpoint") is True
    finally:
        logger.remove(sink)
    assert len(lines) == 2 and "judge for 'semantic_match' is not available: no endpoint" in lines[0]
