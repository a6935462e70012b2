"""Issue 36, case 3: one redactor, with one list of credential forms, for every output.

The report and check-model redactor knew fewer forms than the judge's own URL check: an Azure SAS ``sig=``,
an Azure Functions ``code=``, a key inside a dict-valued model arg (``client_kwargs={'api_key': ...}``, or
lmms-eval's model args stored as a JSON dict) and ``Authorization: Bearer ...`` were shown in clear.

- ``lmms-eval-plugins report`` on two stored runs (model args as a string and as a dict) holding each form:
  no secret in report.html, report.md, stdout or stderr;
- ``lmms-eval-plugins check-model`` with model args holding each form: none in its Markdown, JSON or stderr;
- a static test: no credential-name list or pattern outside ``lmms_eval_plugins/safe_text.py``; the judge's
  URL check and the judge runtime's redactor are safe_text's;
- hand-computed cases of :func:`safe_text.redact`, and its time on 1 MB hostile texts.

The safe_text imports are inside the tests so that the CLI tests also run (and fail) on the code before issue 36.
"""

from __future__ import annotations

import ast
import gc
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPORT_RUN = REPO / "tests" / "data" / "report_runs" / "oracle"
CLI = [sys.executable, "-m", "lmms_eval_plugins.cli"]

# every secret holds LEAK, so one search finds any of them
SAS_LABEL, SAS = "LEAK-label-sig-0a1b2c", "LEAK-sas-sig%2B9x8y7z%3D"
FUNC, DICT, BEARER, PLAIN = "LEAK-func-code-Zk3q==", "sk-LEAK-dict-5f6e7d", "LEAK-bearer.abc.def", "sk-LEAK-plain-1234"
JSON_DICT, JSON_STR, HEADER = "sk-LEAK-json-dict-42", "LEAK-json-string-43", "LEAK-header-bearer-44"
STRING_ARGS = (
    f"pretrained=https://models.example/m?sig={SAS_LABEL},"
    f"sas_url=https://acct.blob.core.windows.net/c/b.json?sv=2022-11-02&se=2030-01-01&sp=r&sig={SAS},"
    f"fn_url=https://fn.azurewebsites.net/api/judge?code={FUNC},"
    f"client_kwargs={{'api_key': '{DICT}', 'timeout': 30}},"
    f'default_headers={{"Authorization": "Bearer {BEARER}"}},'
    f"apikey={PLAIN},trust_remote_code=True,max_new_tokens=16"
)
DICT_ARGS = {
    "pretrained": "m2",
    "client_kwargs": {"api_key": JSON_DICT, "max_retries": 1},
    "extra_body": json.dumps({"token": JSON_STR}),
    "headers": f"Authorization: Bearer {HEADER}",
}
# what must still be shown: the names, the harmless values, where each credential was
SHOWN = (
    "sig=***",
    "code=***",
    "'api_key': '***'",
    "Bearer ***",
    "apikey=***",
    "trust_remote_code=True",
    "max_new_tokens=16",
    "se=2030-01-01",
)


def _run(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
        cwd=cwd,
    )


# ------------------------------------------------------------------------------------------- the real CLIs


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """``report`` on two copies of a stored run: model args as lmms-eval's string, and as a dict."""
    tmp = tmp_path_factory.mktemp("one-redactor-report")
    runs = []
    for name, model_args in (("string", STRING_ARGS), ("dict", DICT_ARGS)):
        run = tmp / name
        shutil.copytree(REPORT_RUN, run)
        [results] = run.glob("*_results.json")
        data = json.loads(results.read_text(encoding="utf-8"))
        data["config"]["model_args"] = model_args
        results.write_text(json.dumps(data), encoding="utf-8")
        runs.append(str(run))
    done = _run("report", *runs, "-o", str(tmp / "out"), "--no-plots", cwd=tmp)
    return done, tmp / "out"


@pytest.mark.cli
def test_the_report_shows_no_credential_of_any_form(report):
    done, out = report
    assert done.returncode == 0, done.stderr[-2000:]
    texts = {"stdout": done.stdout, "stderr": done.stderr}
    texts |= {name: (out / name).read_text(encoding="utf-8") for name in ("report.md", "report.html")}
    for name, text in texts.items():
        leaks = sorted(set(re.findall(r"[\w.%=+-]*LEAK[\w.%=+-]*", text)))
        assert not leaks, f"{name} shows {leaks}"
    for name in ("report.md", "report.html"):
        text = texts[name].replace("&#x27;", "'").replace("&quot;", '"')
        for shown in (*SHOWN, '"api_key": "***"', '"max_retries": 1', "Authorization: Bearer ***"):
            assert shown in text, (name, shown)


@pytest.fixture(scope="module")
def check_model(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("one-redactor-check-model")
    env = {
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / "judge.sqlite3"),
        "HF_DATASETS_CACHE": str(tmp / "hf"),
    }
    done = _run(
        "check-model",
        "--model",
        "oracle",
        "--tasks",
        "errorradar_step_sample",
        "--limit",
        "1",
        "--no-shapes",
        "--no-observe",
        "--json",
        str(tmp / "report.json"),
        "--output_path",
        str(tmp / "runs"),
        "--model_args",
        STRING_ARGS + ",note=<b>\x1b]0;pwned\x07\u202e",
        cwd=tmp,
        env=env,
    )
    return done, tmp / "report.json"


@pytest.mark.cli
def test_check_model_shows_no_credential_of_any_form_and_no_control_character(check_model):
    done, json_path = check_model
    # the oracle takes none of these keys (issue 37 case 14): its run is refused naming the keys, never their values
    assert done.returncode == 1, done.stderr[-2000:]
    assert "are not arguments of --model oracle" in done.stdout, done.stdout[-3000:]
    texts = {"stdout": done.stdout, "stderr": done.stderr, "json": json_path.read_text(encoding="utf-8")}
    for name, text in texts.items():
        assert "LEAK" not in text, (name, re.findall(r"\S*LEAK\S*", text))
        assert not re.search("[\x1b\x07\u202e]", text), name
    for shown in SHOWN:
        assert shown in done.stdout, shown
    assert "note=<b>\\x1b]0;pwned\\x07\\u202e" in done.stdout  # shown, as visible escapes
    assert "&lt;" not in done.stdout and "&gt;" not in done.stdout  # a terminal shows "<b>", not Markdown's entities


# ------------------------------------------------------------------------------------------- one list of forms

SHIPPED = ("lmms_eval_plugins", "judges", "task_yamls")
# words a credential pattern is made of (what an own list or regex of credential names would hold)
_CREDENTIAL_WORD = re.compile(
    r"key|token|secret|passw|pwd|auth|\bsig\b|signature|bearer|credential|cookie", re.IGNORECASE
)


def credential_lists(path: Path) -> list[str]:
    """Lists of two or more credential names (tuple, list, set literals) and regex alternations of two or more
    credential words in ``path``: what a second redaction or refusal list would be made of."""
    from lmms_eval_plugins.safe_text import is_credential_name

    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            hits = [n for n in names if re.fullmatch(r"[\w.\-]{1,40}", n) and is_credential_name(n)]
            if len(hits) >= 2:
                found.append(f"line {node.lineno}: {hits}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "|" in node.value:
            words = [a for a in re.split(r"[|()]", node.value) if len(a) <= 24 and _CREDENTIAL_WORD.search(a)]
            if len(words) >= 2:
                found.append(f"line {node.lineno}: {node.value[:60]!r}")
    return found


def test_no_credential_list_outside_safe_text():
    own = {}
    for folder in SHIPPED:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).as_posix()
            if rel != "lmms_eval_plugins/safe_text.py" and credential_lists(path):
                own[rel] = credential_lists(path)
    assert not own, f"credential names listed outside lmms_eval_plugins/safe_text.py: {own}"


def test_the_check_finds_a_second_list(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'NAMES = frozenset(("api_key", "sig"))\nPATTERN = r"apikey|passwd"\n'
        'OK = ("max_new_tokens", "trust_remote_code", "keyframes")\n'
    )
    assert sorted(f.split(":")[0] for f in credential_lists(planted)) == ["line 1", "line 2"]


def test_the_judges_use_the_one_redactor_and_the_one_list():
    from lmms_eval_plugins.judges import redaction
    from lmms_eval_plugins.judges.endpoint import credential_query_params

    from lmms_eval_plugins import safe_text

    assert redaction.Redactor is safe_text.Redactor and redaction.encoded_forms is safe_text.encoded_forms
    # every name the redactor hides, the judge's URL check refuses; and nothing else
    for name in (
        "sig",
        "code",
        "X-Amz-Signature",
        "x-functions-key",
        "Ocp-Apim-Subscription-Key",
        "clientSecret",
        "passwd",
        "access_token",
        "key",
    ):
        assert credential_query_params(f"https://h/v1?api-version=1&{name}=v") == [name], name
        assert safe_text.redact(f"https://h/v1?api-version=1&{name}=v") == f"https://h/v1?api-version=1&{name}=***"


# ------------------------------------------------------------------------------------------- by hand


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            "https://a.blob.core.windows.net/c?sv=2022-11-02&sig=AbC%2Bd&sp=r",
            "https://a.blob.core.windows.net/c?sv=2022-11-02&sig=***&sp=r",
        ),
        ("https://f.azurewebsites.net/api/x?code=Zk3q==&name=a", "https://f.azurewebsites.net/api/x?code=***&name=a"),
        ("client_kwargs={'api_key': 'sk-1', 'timeout': 3}", "client_kwargs={'api_key': '***', 'timeout': 3}"),
        ('{"client_kwargs": {"api_key": "sk-2"}, "n": 1}', '{"client_kwargs": {"api_key": "***"}, "n": 1}'),
        ('"{\\"token\\": \\"t-3\\"}"', '"{\\"token\\": \\"***\\"}"'),
        ("Authorization: Bearer abc.def", "Authorization: Bearer ***"),
        ("curl -H 'Authorization: Basic dXNlcjpwYXNz' h", "curl -H 'Authorization: Basic ***' h"),
        ("sent Bearer sk-4 upstream", "sent Bearer *** upstream"),
        ("http://user:pw@h:1/v1?api_key=k&q=2", "http://***@h:1/v1?api_key=***&q=2"),
        ("X-Api-Key: abc123, other", "X-Api-Key: ***, other"),
        ("password = 'a b c' rest", "password = '***' rest"),
        ("auth=('u', 'p'),y=1", "auth=***,y=1"),
        ("x='api_key=secret'", "x='api_key=***'"),
        # not credentials: counts, flags, keyframes, prose and URLs without one
        (
            "max_new_tokens=16,trust_remote_code=True,keyframes=3",
            "max_new_tokens=16,trust_remote_code=True,keyframes=3",
        ),
        ("Note: see http://example.com/a:b", "Note: see http://example.com/a:b"),
        ("api_key=***,x=1", "api_key=***,x=1"),
    ],
)
def test_redact_by_hand(text, expected):
    from lmms_eval_plugins.safe_text import redact

    assert redact(text) == expected


def test_redact_the_given_secrets_in_every_encoded_form():
    import base64
    from urllib.parse import quote

    from lmms_eval_plugins.safe_text import redact

    key = "sk-given/key+0123"
    text = f"a {key} b {quote(key, safe='')} c {base64.b64encode(key.encode()).decode()} d"
    # 17 bytes: 22 base64 characters made of key bits alone, then "M" (2 key bits, 4 of padding) and "="
    assert redact(text, [key]) == "a *** b *** c ***M= d"


def test_model_args_as_a_dict_keep_their_shape_and_lose_their_credentials():
    from lmms_eval_plugins.safe_text import (
        credential_values,
        redact_model_args,
        redact_structure,
    )

    assert redact_model_args(DICT_ARGS) == (
        'pretrained=m2,client_kwargs={"api_key": "***", "max_retries": 1},'
        'extra_body={"token": "***"},headers=Authorization: Bearer ***'
    )
    assert redact_structure({"a": [{"sig": "x"}, "code=y"], "n": 2}) == {"a": [{"sig": "***"}, "code=***"], "n": 2}
    assert credential_values("use_auth=True,api_key=sk-12345,x={'token': 'tok-999'}") == ["sk-12345", "tok-999"]


def test_the_judges_redactor_keeps_reply_text_it_parses():
    from lmms_eval_plugins.safe_text import Redactor

    redact = Redactor(["sk-judge-key-0"])  # forms=False: a verdict is parsed from the redacted reply
    assert redact("key: B, the answer; echoed sk-judge-key-0") == "key: B, the answer; echoed ***"
    assert Redactor(["sk-judge-key-0"], forms=True)("key: B") == "key: ***"


@pytest.mark.parametrize(
    "unit",
    [
        "api_key='x' ",
        "api_key='",
        "a=",
        "api_key={",
        "http://u@h ",
        "Bearer x ",
        '\\"token\\": \\"',
        "key=(",
        "x" * 50 + ":",
    ],
)
def test_redact_is_linear_on_hostile_text(unit):
    from lmms_eval_plugins.safe_text import redact

    def seconds(n: int) -> float:
        text = unit * (n // len(unit))
        best = float("inf")
        for _ in range(3 if n < 100_000 else 1):
            started = time.perf_counter()
            redact(text)
            best = min(best, time.perf_counter() - started)
        return best

    gc.disable()
    try:
        small, big = seconds(10_000), seconds(1_000_000)
    finally:
        gc.enable()
    assert big < 1000 * small + 0.5, f"{unit!r}: {big:.3f} s for 1 MB, {small * 1e3:.2f} ms for 10 KB"
