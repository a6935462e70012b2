"""What a run adds to lmms-eval's console (lmms_eval_plugins/console.py): pure functions of the results dict."""

from __future__ import annotations

from lmms_eval_plugins import console


def test_console_table_compacts_container_metrics_only():
    results = {"results": {"t": {"acc,none": 50.0, "by_type,none": {"a": 1.0, "b": 0.0}, "alias": "t"}}}
    compact = console.compact_container_values(results)
    assert compact["results"]["t"]["acc,none"] == 50.0
    assert compact["results"]["t"]["by_type,none"] == "{2 entries, see results JSON}"
    assert results["results"]["t"]["by_type,none"] == {"a": 1.0, "b": 0.0}  # the original is untouched


def test_a_run_with_unscored_samples_ends_with_the_command_that_finishes_them():
    results = {"results": {"a": {"acc,none": None, "unscored,none": 3, "alias": "a"},
                           "b": {"acc,none": 50.0, "unscored,none": 0},
                           "g": {"score,none": None, "unscored,none": 3}},
               "group_subtasks": {"g": ["a"], "a": [], "b": []}}
    assert console.unscored_counts(results) == {"a": 3}  # groups repeat their tasks' counts
    block = console.unscored_block(results, ["lmms-eval", "--output_path", "out/run1/", "--log_samples"])
    assert "3 sample(s) are UNSCORED" in block and "  a: 3" in block
    assert "lmms-eval-plugins score out/run1\n" in block
    without_samples = console.unscored_block(results, ["lmms-eval", "--output_path", "out"])
    assert "pass --log_samples" in without_samples and "score out" not in without_samples
    assert console.unscored_block({"results": {"b": {"unscored,none": 0}}}, []) == ""
