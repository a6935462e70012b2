"""The hooks a task folder's utils.py gets from its spec (lmms_eval_plugins/task_hooks.py): every metric's
aggregation comes from the spec, each process_results fills exactly its metric list, and utils.py is
the generated four lines for every installed benchmark."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

from lmms_eval_plugins.benchmark import Benchmark, Metric, registry
from lmms_eval_plugins.outcome import UNSCORED_FIELD
from lmms_eval_plugins.task_hooks import RUN_COUNTS, SpecError, aggregation_of, item_values, task_hooks, utils_source

OURS = sorted(registry())


def _mean_correct(items):
    return 100.0 * sum(bool(i["correct"]) for i in items) / len(items)


ACC = Metric("acc", True, item_score="correct", aggregate=_mean_correct)
JUDGED = Metric("judged_acc", True, aggregate=_mean_correct, needs_judge=True)
PRED = Metric("preds", True, unit="list", aggregate=list, per_item=lambda item: item["pred"])
UNSCORED = Metric("unscored", False, unit="count")


def test_a_metric_without_an_aggregate_is_a_named_spec_error():
    with pytest.raises(SpecError, match=r"demo: metric 'acc2' declares no aggregate; fix: .*aggregate="):
        aggregation_of(Metric("acc2", True), "demo")


def test_run_counts_come_from_the_core():
    for name, count in RUN_COUNTS.items():
        assert aggregation_of(Metric(name, False, unit="count")) is count


def test_an_aggregation_is_null_over_an_unscored_item():
    agg = aggregation_of(ACC)
    assert agg([{"correct": True}, {"correct": False}]) == 50.0
    assert agg([{"correct": True}, {"correct": True, UNSCORED_FIELD: "model request failed"}]) is None


def test_item_values_fill_every_metric_of_the_list_in_order():
    out = item_values((ACC, PRED, UNSCORED), {"correct": True, "pred": "B"}, ["B"])
    assert list(out) == ["acc", "preds", "unscored"]
    assert out["acc"]["acc"] == 1.0  # the headline's 0/1 under its own name (lmms-eval's score_key)
    assert out["preds"] == "B"  # per_item picks the metric's part of the item
    assert out["unscored"] == {UNSCORED_FIELD: None}


def test_a_failed_request_marks_every_metric_and_a_failed_verdict_only_the_judged_ones():
    failed = item_values((ACC, JUDGED, UNSCORED), {"correct": False}, ["[LMMS_EVAL_REQUEST_FAILED] timeout"])
    assert failed["acc"][UNSCORED_FIELD] and failed["judged_acc"][UNSCORED_FIELD]
    no_verdict = item_values((ACC, JUDGED, UNSCORED), {"correct": False}, ["B"], judge={"error": "HTTP 500"})
    assert (
        UNSCORED_FIELD not in no_verdict["acc"] and no_verdict["judged_acc"][UNSCORED_FIELD] == "judge error: HTTP 500"
    )


def _spec(metrics) -> Benchmark:
    return Benchmark(name="demo", title="Demo", description="d", tasks_dir=Path("."), metric_lists={"_t_yaml": metrics})


def test_task_hooks_bind_the_sample_folder_and_generate_the_aggregations(tmp_path):
    def process_docs(dataset, sample_dir=None):
        return [sample_dir]

    def doc_to_text(doc, lmms_eval_specific_kwargs=None):
        return "q"

    module = types.ModuleType("demo_tasks")
    module.process_docs, module.doc_to_text, module.HOOKS = process_docs, doc_to_text, ("process_docs", "doc_to_text")
    hooks = task_hooks(_spec((ACC, UNSCORED)), module, tmp_path)
    assert hooks["process_docs"]([]) == [tmp_path / "sample_data"]
    assert hooks["doc_to_text"] is doc_to_text and hooks["SAMPLE_DIR"] == tmp_path / "sample_data"
    assert hooks["agg_acc"]([{"correct": True}]) == 100.0 and hooks["agg_unscored"] is RUN_COUNTS["unscored"]
    twin = Metric("acc", True, aggregate=lambda items: 0.0)  # same name and hook, another computation
    with pytest.raises(SpecError, match="two metrics aggregate through agg_acc differently"):
        task_hooks(
            Benchmark(
                name="demo",
                title="Demo",
                description="d",
                tasks_dir=Path("."),
                metric_lists={"_a_yaml": (ACC,), "_b_yaml": (twin,)},
            ),
            module,
            tmp_path,
        )
    module.HOOKS = ("process_docs", "process_results")
    with pytest.raises(SpecError, match="names 'process_results', which it does not define"):
        task_hooks(_spec((ACC,)), module, tmp_path)


@pytest.mark.parametrize("name", OURS)
def test_every_benchmark_utils_is_the_generated_adapter(name):
    spec = registry()[name]
    package = f"lmms_eval_plugins.benchmarks.{name}"
    assert (spec.tasks_dir / "utils.py").read_text(encoding="utf-8") == utils_source(name, package)


@pytest.mark.parametrize("name", OURS)
def test_every_metric_of_every_benchmark_has_its_aggregation_and_every_yaml_hook_exists(name):
    spec = registry()[name]
    for metrics in spec.metric_lists.values():
        for metric in metrics:
            assert callable(aggregation_of(metric, name)), metric.name
    utils = spec.hooks()
    for metric in spec.metrics().values():
        assert callable(getattr(utils, metric.hook)), metric.hook
