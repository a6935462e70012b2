"""What a run adds to lmms-eval's console (lmms_eval_plugins/console.py): pure functions of the results dict
(the CLI side: tests/test_cli_judge_outage.py, tests/test_cli_messages.py)."""

from __future__ import annotations

import pytest

from lmms_eval_plugins import console


def test_console_table_compacts_container_metrics_only():
    results = {"results": {"t": {"acc,none": 50.0, "by_type,none": {"a": 1.0, "b": 0.0}, "alias": "t"}}}
    compact = console.compact_container_values(results)
    assert compact["results"]["t"]["acc,none"] == 50.0
    assert compact["results"]["t"]["by_type,none"] == "{2 entries, see results JSON}"
    assert results["results"]["t"]["by_type,none"] == {"a": 1.0, "b": 0.0}  # the original is untouched


def test_a_run_with_unscored_samples_ends_with_the_command_that_finishes_them():
    results = {
        "results": {
            "a": {"acc,none": None, "unscored,none": 3, "alias": "a"},
            "b": {"acc,none": 50.0, "unscored,none": 0},
            "g": {"score,none": None, "unscored,none": 3},
        },
        "group_subtasks": {"g": ["a"], "a": [], "b": []},
    }
    assert console.unscored_counts(results) == {"a": 3}  # groups repeat their tasks' counts
    block = console.unscored_block(results, ["lmms-eval", "--output_path", "out/run1/", "--log_samples"])
    assert "3 sample(s) are UNSCORED" in block and "  a: 3" in block
    assert "lmms-eval-plugins score out/run1\n" in block
    without_samples = console.unscored_block(results, ["lmms-eval", "--output_path", "out"])
    assert "pass --log_samples" in without_samples and "score out" not in without_samples
    assert console.unscored_block({"results": {"b": {"unscored,none": 0}}}, []) == ""


def test_count_and_breakdown_rows_show_no_stderr_in_the_console_table():
    """lmms-eval prints the stderr it computed over counts (0.0000); units come from the benchmark spec."""
    metrics = {
        "acc_r,none": 50.0,
        "acc_r_stderr,none": 14.43,
        "acc_r_stderr_clt,none": 14.43,
        "unscored,none": 0,
        "unscored_stderr,none": 0.0,
        "unscored_stderr_clt,none": 0.0,
        "skipped_by_reason,none": {"missing media": 2},
        "skipped_by_reason_stderr,none": 0.0,
        "parse_fail,none": 3,
        "parse_fail_stderr_clustered,none": 0.0,
        "alias": "virectify_sample",
        "iou,none": None,
        "iou_stderr_clt,none": 0.0,
    }
    shown = console.display_values({"results": {"virectify_sample": metrics}}, compact=False)["results"][
        "virectify_sample"
    ]
    assert shown["acc_r_stderr,none"] == 14.43 and shown["acc_r_stderr_clt,none"] == 14.43  # a % metric keeps it
    assert shown["unscored_stderr,none"] == shown["unscored_stderr_clt,none"] == "N/A"
    assert shown["parse_fail_stderr_clustered,none"] == "N/A" and shown["skipped_by_reason_stderr,none"] == "N/A"
    assert shown["skipped_by_reason,none"] == {"missing media": 2}  # compact=False: values in full
    assert shown["iou_stderr_clt,none"] == "N/A"  # a null (unscored) value has no error bar either
    assert metrics["unscored_stderr,none"] == 0.0  # the results dict itself is untouched
    # a task that is not ours: only a dict value is known to have no error bar
    other = {"acc,none": 1.0, "acc_stderr,none": 0.0, "n,none": {"a": 1}, "n_stderr,none": 0.0}
    shown = console.display_values({"results": {"mmmu_val": other}})["results"]["mmmu_val"]
    assert (
        shown["acc_stderr,none"] == 0.0
        and shown["n_stderr,none"] == "N/A"
        and shown["n,none"] == "{1 entries, see results JSON}"
    )


def _judged(reports) -> dict:
    return {
        "results": {"virectify_sample": {"acc_r,none": None, "unscored,none": 12}},
        "lmms_eval_plugins_judges": reports,
    }


def test_the_block_names_judge_failures_by_cause_and_host_with_their_fix():
    reports = [
        {"judge_errors_by_cause": {"http://127.0.0.1:9": {"connection refused": 8, "HTTP 401": 1}}},
        {
            "judge_errors_by_cause": {
                "http://127.0.0.1:9": {"connection refused": 3},
                "https://api.x": {"timeout after 60 s": 2},
            }
        },
        {"by_model": {}},
        "not a report",
    ]
    assert console.judge_error_causes(_judged(reports)) == [
        ("connection refused", "http://127.0.0.1:9", 11),
        ("timeout after 60 s", "https://api.x", 2),
        ("HTTP 401", "http://127.0.0.1:9", 1),
    ]
    lines = console.unscored_block(
        _judged(reports), ["lmms-eval", "--output_path", "out", "--log_samples"]
    ).splitlines()
    at = lines.index("Judge errors (samples), by cause:")
    assert lines[at + 1 : at + 7] == [
        "  11 x connection refused at http://127.0.0.1:9",
        "      fix: nothing listens there: start the judge server, or point OPENAI_BASE_URL at it",
        "  2 x timeout after 60 s at https://api.x",
        "      fix: raise LMMS_EVAL_PLUGINS_JUDGE_TIMEOUT, or lower LMMS_EVAL_PLUGINS_JUDGE_CONCURRENCY",
        "  1 x HTTP 401 at http://127.0.0.1:9",
        "      fix: the key was refused: check OPENAI_API_KEY",
    ]
    assert "by cause" not in console.unscored_block(_judged([]), [])  # no judge errors: no such lines


@pytest.mark.parametrize(
    "cause, fix",
    [
        ("HTTP 503", "the judge server failed"),
        ("HTTP 404", "LMMS_EVAL_PLUGINS_JUDGE_MODEL"),
        ("HTTP 422", "the server refused the request"),
        ("host name not found", "does not resolve"),
        ("no complete reply within 120 s", "LMMS_EVAL_PLUGINS_JUDGE_DEADLINE"),
        ("unparseable reply", "stronger judge model"),
        ("something new", "logged samples"),
    ],
)
def test_each_cause_has_its_fix(cause, fix):
    assert fix in console.judge_fix(cause)
