"""Issue 36, case 10: no raw control character from a stored run reaches the terminal or report.md.

A copied run folder is data (SECURITY.md): its model name, task version, model args, judge failure reasons
and replies may hold terminal sequences: a window title (``ESC ]0;...BEL``), an erased line followed by a fake
"every sample scored" (``ESC [2K CR``), a clipboard write (``ESC ]52;c;...BEL``) and a bidi override (U+202E).
``lmms-eval-plugins report`` and ``check-run`` on such folders, through the real CLI: none of these characters
in stdout, stderr or report.md (nor report.html), their visible escapes instead. Unit tests of
:func:`safe_text.escape_controls` beside them.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
REPORT_RUN = REPO / "tests" / "data" / "report_runs" / "oracle"
CLI = [sys.executable, "-m", "lmms_eval_plugins.cli"]

TITLE, ERASE, CLIPBOARD, BIDI = "\x1b]0;pwned\x07", "\x1b[2K\r", "\x1b]52;c;cHduZWQ=\x07", "\u202e"
FAKE = "check-run: OK, every sample scored"
HOSTILE = f"{TITLE}{ERASE}{FAKE}{CLIPBOARD}{BIDI}txt.exe"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")  # tab and newline may stay
VISIBLE = ("\\x1b]0;pwned\\x07", "\\x1b[2K\\x0d", "\\x1b]52;c;cHduZWQ=\\x07", "\\u202e")


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=300, cwd=cwd, env=dict(os.environ), check=False
    )


def _raw(text: str) -> list[str]:
    return sorted({repr(c) for c in RAW.findall(text)})


def _hostile_copy(folder: Path) -> Path:
    """The stored oracle run with the hostile text in its model name, lmms-eval version, task versions, model
    args, judge failure reasons and one reply."""
    shutil.copytree(REPORT_RUN, folder)
    [results_path] = folder.glob("*_results.json")
    data = json.loads(results_path.read_text(encoding="utf-8"))
    data["config"]["model"] = f"oracle{HOSTILE}"
    data["config"]["model_args"] = f"pretrained=m{HOSTILE},note={HOSTILE}"
    data["lmms_eval_version"] = f"0.7.3{HOSTILE}"
    data["versions"] = {task: f"1{HOSTILE}" for task in data["versions"]}
    results_path.write_text(json.dumps(data), encoding="utf-8")
    judge_path = folder / "judge_report.json"
    judge = json.loads(judge_path.read_text(encoding="utf-8"))
    judge["failures_by_reason"] = {"gpt-4o": {f"batch b1 failed: {HOSTILE}": 3}}  # a batch error message
    judge_path.write_text(json.dumps(judge), encoding="utf-8")
    [samples] = folder.glob("*_samples_errorradar_step_sample.jsonl")
    lines = samples.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["filtered_resps"] = first["resps"] = f"Error Step: Step 2{HOSTILE}"
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("control-chars-report")
    run = _hostile_copy(tmp / "run")
    return _run("report", str(run), "-o", str(tmp / "out"), "--no-plots", cwd=tmp), tmp / "out"


@pytest.mark.cli
def test_the_report_writes_and_prints_no_control_character(report):
    done, out = report
    assert done.returncode == 0, done.stderr[-2000:]
    md = (out / "report.md").read_text(encoding="utf-8")
    html = (out / "report.html").read_text(encoding="utf-8")
    for name, text in (("stdout", done.stdout), ("stderr", done.stderr), ("report.md", md), ("report.html", html)):
        assert not _raw(text), f"{name} holds raw {_raw(text)}"
    assert "pwned" in md and "x1b]0;pwned" in md and "u202e" in md  # the text is there, as visible escapes
    assert "batch b1 failed: \\\\x1b]0;pwned" in md  # md_text escapes the escape's backslash for Markdown
    assert "\\x1b]52;c;cHduZWQ=\\x07" in html


@pytest.fixture(scope="module")
def check_runs(tmp_path_factory):
    """``check-run`` on a run whose results name a task with the hostile text (unscored), and on a folder whose
    recorded failure holds it."""
    tmp = tmp_path_factory.mktemp("control-chars-check-run")
    unscored = tmp / "unscored"
    unscored.mkdir()
    [original] = REPORT_RUN.glob("*_results.json")
    data = json.loads(original.read_text(encoding="utf-8"))
    data["results"][f"errorradar{HOSTILE}"] = {"alias": "x", "unscored,none": 2}
    (unscored / original.name).write_text(json.dumps(data), encoding="utf-8")
    failed = tmp / "failed"
    failed.mkdir()
    (failed / "lmms_eval_plugins_failed.json").write_text(
        json.dumps(
            {
                "time": 0,
                "error": "DataError",
                "problem": f"bad record {HOSTILE}",
                "record": HOSTILE,
                "path": None,
                "fix": f"see {HOSTILE}",
            }
        ),
        encoding="utf-8",
    )
    return [_run("check-run", str(folder), cwd=tmp) for folder in (unscored, failed)]


@pytest.mark.cli
def test_check_run_prints_no_control_character(check_runs):
    for done in check_runs:
        assert done.returncode == 1, done.stdout + done.stderr
        for name, text in (("stdout", done.stdout), ("stderr", done.stderr)):
            assert not _raw(text), f"{name} holds raw {_raw(text)}"
        for visible in VISIBLE:
            assert visible in done.stdout, (visible, done.stdout)
    unscored, failed = check_runs
    assert "INCOMPLETE" in unscored.stdout and "FAILED" in failed.stdout


# ------------------------------------------------------------------------------------------- by hand


@pytest.mark.parametrize(
    "text, expected",
    [
        (TITLE, "\\x1b]0;pwned\\x07"),
        ("a\x1b[2K\rb", "a\\x1b[2K\\x0db"),
        ("tab\tnew\nline", "tab\tnew\nline"),
        ("\x00\x7f\x85\x9b", "\\x00\\x7f\\x85\\x9b"),  # NUL, DEL, C1 NEL and CSI
        ("abc\u202ecod.exe \u2066x\u2069 \u200f", "abc\\u202ecod.exe \\u2066x\\u2069 \\u200f"),
        ("plain ünïcödé 🙂", "plain ünïcödé 🙂"),
    ],
)
def test_escape_controls_by_hand(text, expected):
    from lmms_eval_plugins.safe_text import escape_controls

    assert escape_controls(text) == expected


def test_escape_controls_without_newlines_and_in_markdown():
    from lmms_eval_plugins.safe_text import escape_controls, md_code, md_text

    assert escape_controls("a\nb\tc", keep_newlines=False) == "a\\x0ab\tc"
    assert md_text(f"m{TITLE}") == "m\\\\x1b]0;pwned\\\\x07"
    assert md_code(f"m{BIDI}`") == "`` m\\u202e` ``"


def test_the_console_helper_escapes_what_it_prints(capsys):
    import sys as _sys

    from lmms_eval_plugins.console import emit, unscored_block

    emit("task", HOSTILE)
    emit(HOSTILE, file=_sys.stderr)
    block = unscored_block({"results": {f"t{ERASE}": {"unscored,none": 1}}}, [])
    out, err = capsys.readouterr()
    assert not _raw(out) and not _raw(err) and not _raw(block)
    assert out.startswith("task \\x1b]0;pwned\\x07") and "t\\x1b[2K\\x0d: 1" in block
