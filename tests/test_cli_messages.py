"""The first hour's messages, through the real CLI (issue 29).

- A missing judge is said once: with no OPENAI_* variable, `lmms-eval --model oracle` on a judged task
  names the missing endpoint once (lmms-eval builds a task's filters more than once), and
  `lmms-eval-plugins score` of that run exits 1 with the reason in full (it was cut at
  "Either set OPENAI_API_KEY (OpenAI)...").
- A misspelled `--tasks` name: lmms-eval's "Tasks not found" is followed by a last line "did you mean",
  and `check-run` names the task instead of blaming the output path.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from lmms_eval_plugins.judges.endpoint import missing_endpoint_message
from lmms_eval_plugins.cli_run import OFFLINE_ENV, lmms_eval_command, run_lmms_eval

pytestmark = pytest.mark.cli

JUDGE_VARS = (
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_API_URL",
    "OPENAI_API_BASE",
    "LMMS_EVAL_PLUGINS_JUDGE",
    "LMMS_EVAL_PLUGINS_JUDGE_MODEL",
    "LMMS_EVAL_PLUGINS_JUDGE_REPORT",
)


def _plugins(*args: str, env: dict[str, str], cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmms_eval_plugins.cli", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=900,
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("messages")
    env = {k: v for k, v in os.environ.items() if k not in JUDGE_VARS}
    env.update(
        OFFLINE_ENV,
        LMMS_EVAL_PLUGINS_CACHE=str(tmp / "cache"),
        HF_DATASETS_CACHE=str(tmp / "hf"),
        LMMS_EVAL_PLUGINS_JUDGE_CACHE=str(tmp / "judge.sqlite3"),
    )
    out: dict = {"seconds": {}, "tmp": tmp}
    saved = {k: os.environ.pop(k) for k in JUDGE_VARS if k in os.environ}  # run_lmms_eval merges os.environ
    try:
        for name, tasks in (("no_judge", "virectify_sample"), ("misspelled", "virectfy_sample")):
            started = time.monotonic()
            out[name] = run_lmms_eval(tasks=tasks, model="oracle", output_dir=tmp / name, env=env)
            out["seconds"][name] = time.monotonic() - started
        # issue 37 case 12: an --output_path that is a file is refused before the run starts
        (tmp / "results.json").write_text("not a folder\n", encoding="utf-8")
        command = lmms_eval_command(tasks="errorradar_step_sample", model="oracle", model_args=None, output_dir=tmp)
        command[command.index("--output_path") + 1] = str(tmp / "results.json")
        started = time.monotonic()
        out["output_file"] = subprocess.run(
            command,
            env={**os.environ, **env},
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=900,
        )
        out["seconds"]["output_file"] = time.monotonic() - started
        # issue 37 case 14: a misspelled --model_args key, for our model and for one of lmms-eval's
        for name, model, model_args in (
            ("sed", "random", "sed=0"),
            ("max_pixel", "qwen2_5_vl", "pretrained=/nowhere,max_pixel=12544"),
        ):
            started = time.monotonic()
            out[name] = run_lmms_eval(
                tasks="errorradar_step_sample", model=model, model_args=model_args, output_dir=tmp / name, env=env
            )
            out["seconds"][name] = time.monotonic() - started
        # issue 37 case 11: the headline command with no network, no data and no judge names every blocker at
        # once, before the model loads (the path below is no model: loading it first would fail on it)
        started = time.monotonic()
        out["blocked"] = run_lmms_eval(
            tasks="virectify,mmerror",
            model="qwen2_5_vl",
            model_args="pretrained=/nowhere",
            output_dir=tmp / "blocked",
            env={**env, "HF_HUB_CACHE": str(tmp / "empty-hub")},
        )
        out["seconds"]["blocked"] = time.monotonic() - started
        started = time.monotonic()
        out["score"] = _plugins("score", str(tmp / "no_judge"), env=env, cwd=tmp)
        out["check_run"] = _plugins("check-run", str(tmp / "misspelled"), env=env, cwd=tmp)
        out["check_run_tasks"] = _plugins(
            "check-run", str(tmp / "never_written"), "--tasks", "virectfy_sample", env=env, cwd=tmp
        )
        out["seconds"]["score_and_check_runs"] = time.monotonic() - started
    finally:
        os.environ.update(saved)
    print("\nmessage run seconds:", {k: round(v, 1) for k, v in out["seconds"].items()})
    return out


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_missing_judge_is_said_once(runs):
    run = runs["no_judge"]
    assert run.results_path is not None and run.task_results("virectify_sample")["unscored"] == 12
    # issue 37 case 15: no judge was asked, so none erred: 12 unscored "not judged", 0 judge errors (was 12)
    assert run.task_results("virectify_sample")["acc_r_judge_errors"] == 0
    message = _flat(missing_endpoint_message("semantic_match"))
    assert _flat(run.output).count(message) == 1, run.tail()
    assert run.output.count("is not available") == 1
    assert "judge not available (said above); 12 responses left unscored" in run.output
    # and the console table shows no stderr for the unscored acc_r nor for the count rows
    rows = {
        r[3].strip(): r
        for r in (
            line.strip("|").split("|") for line in run.output.splitlines() if line.startswith("|virectify_sample")
        )
    }
    for metric in ("acc_r", "unscored", "acc_r_judge_errors", "skipped", "parse_fail"):
        assert [c.strip() for c in rows[metric][7:]] == ["N/A"] * len(rows[metric][7:]), rows[metric]


def test_score_without_a_judge_gives_the_reason_in_full(runs):
    done = runs["score"]
    assert done.returncode == 1, done.stdout[-4000:]
    assert "virectify_sample: 12 unscored: 12 x reason 1" in done.stdout
    reason = _flat(done.stdout[done.stdout.index("reason 1: ") :])
    assert reason.startswith(f"reason 1: not judged: {_flat(missing_endpoint_message('semantic_match'))}")
    assert "..." not in done.stdout.split("reason 1: ")[1].split("without a judge verdict")[0]


def test_a_misspelled_task_gets_did_you_mean_as_the_last_line(runs):
    run = runs["misspelled"]
    assert "Tasks not found: virectfy_sample" in run.output  # lmms-eval's own error stays
    last = run.output.rstrip().splitlines()[-1]
    assert last.startswith("lmms-eval-plugins: did you mean virectify_sample ") and last.endswith(
        " (not virectfy_sample)?"
    )


def test_check_run_names_the_missing_task_not_the_output_path(runs):
    for name in ("check_run", "check_run_tasks"):
        done = runs[name]
        assert done.returncode == 1 and "no task named 'virectfy_sample'" in done.stdout, (name, done.stdout)
        assert "did you mean virectify_sample" in done.stdout and "--output_path?" not in done.stdout, name


def test_an_output_path_that_is_a_file_is_refused_before_the_run_starts(runs):
    # before: every request ran, then the plugin's own cleanup raised NotADirectoryError: results lost, exit 0
    done, path = runs["output_file"], runs["tmp"] / "results.json"
    text = _flat(done.stdout)
    assert f"--output_path {path} is a file, not a folder" in text, done.stdout[-3000:]
    assert "fix: give --output_path a folder" in text and "NotADirectoryError" not in text
    assert "Running generate_until requests" not in done.stdout  # stopped before any request
    assert path.read_text(encoding="utf-8") == "not a folder\n"  # untouched


def test_a_misspelled_model_arg_is_named_with_the_closest_key(runs):
    # before: `--model random --model_args sed=0` ran with the default seed; qwen2_5_vl's `max_pixel` ended in a
    # 23-line traceback "AssertionError: Unexpected kwargs"
    ours, theirs = _flat(runs["sed"].output), _flat(runs["max_pixel"].output)
    assert "--model_args: 'sed' (did you mean 'seed'?) is not an argument of --model random" in ours, ours[-2000:]
    assert "its arguments: seed" in ours and runs["sed"].results_path is None
    assert (
        "--model_args: 'max_pixel' (did you mean 'max_pixels'?) is not an argument of --model qwen2_5_vl" in theirs
    ), theirs[-2000:]
    assert "max_pixels" in theirs.split("its arguments:")[-1] and "Unexpected kwargs" not in theirs


def test_the_headline_command_names_every_blocker_at_once_before_the_model_loads(runs):
    # before: only the MMErroR download was named, after the model loaded; the user fixed it, restarted
    # (loading the model again) and only then met the ViRectify data; the block pointed to plain `doctor`
    run = runs["blocked"]
    lines = run.output.rstrip().splitlines()
    bars = [i for i, line in enumerate(lines) if line.startswith("=" * 50)]
    assert bars and bars[-1] == len(lines) - 1, run.output[-3000:]
    block = _flat("\n".join(lines[bars[-2] :]))
    assert "the run stopped: RunBlockedError" in block and "2 things must be fixed before this run can start" in block
    assert "blocker: virectify data: not public: needs a local copy" in block
    assert "blocker: mmerror data: not in the Hugging Face cache" in block and "HF_HUB_OFFLINE=1" in block
    assert block.count("fix: ") >= 3 and "LMMS_EVAL_PLUGINS_DATA_ROOT" in block
    # the missing judge is a warning: the judged metrics would be null, the run would still go
    assert "warning: judge: no judge endpoint configured" in block and "judged metrics null" in block
    named = block.split("(check everything these tasks need: lmms-eval-plugins doctor --tasks ")[1].split(")")[0]
    assert sorted(named.split(",")) == ["mmerror", "virectify"]  # lmms-eval's order of the tasks asked
    assert "/nowhere" not in run.output.split("RunBlockedError")[0]  # the model was never loaded
    assert run.results_path is None and run.returncode == 0  # lmms-eval's exit code; check-run tells the truth
    from lmms_eval_plugins import run_status

    assert run_status.main([str(runs["tmp"] / "blocked")]) == 1
