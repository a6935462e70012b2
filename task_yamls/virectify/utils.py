"""lmms-eval's `!function utils.*` hooks for the virectify tasks, generated from the spec and
hooks of lmms_eval_plugins.benchmarks.virectify (lmms_eval_plugins/task_hooks.py):
edit those, then run `lmms-eval-plugins sync-yaml virectify`, which rewrites this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.virectify import tasks
from lmms_eval_plugins.benchmarks.virectify.spec import BENCHMARK
from lmms_eval_plugins.task_hooks import aggregation_hook, with_sample_dir

SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# the benchmark's hooks (tasks.HOOKS)
process_docs = with_sample_dir(tasks.process_docs, SAMPLE_DIR)
process_docs_reflect = with_sample_dir(tasks.process_docs_reflect, SAMPLE_DIR)
doc_to_visual = tasks.doc_to_visual
doc_to_text = tasks.doc_to_text
doc_to_messages = tasks.doc_to_messages
JudgeFilter = tasks.JudgeFilter
judge_item = tasks.judge_item
process_results = tasks.process_results
process_results_reflect = tasks.process_results_reflect

# one aggregation per metric hook of the spec
agg_acc_r = aggregation_hook(BENCHMARK, "agg_acc_r")
agg_acc_r_error_identify = aggregation_hook(BENCHMARK, "agg_acc_r_error_identify")
agg_acc_r_rationale = aggregation_hook(BENCHMARK, "agg_acc_r_rationale")
agg_acc_r_judge_errors = aggregation_hook(BENCHMARK, "agg_acc_r_judge_errors")
agg_answer_parse_fail = aggregation_hook(BENCHMARK, "agg_answer_parse_fail")
agg_skipped = aggregation_hook(BENCHMARK, "agg_skipped")
agg_unscored = aggregation_hook(BENCHMARK, "agg_unscored")
agg_skipped_by_reason = aggregation_hook(BENCHMARK, "agg_skipped_by_reason")
agg_acc_i = aggregation_hook(BENCHMARK, "agg_acc_i")
agg_iou = aggregation_hook(BENCHMARK, "agg_iou")
agg_graph_jaccard = aggregation_hook(BENCHMARK, "agg_graph_jaccard")
agg_format_rate = aggregation_hook(BENCHMARK, "agg_format_rate")
agg_parse_fail = aggregation_hook(BENCHMARK, "agg_parse_fail")
agg_by_domain = aggregation_hook(BENCHMARK, "agg_by_domain")
agg_by_error_type = aggregation_hook(BENCHMARK, "agg_by_error_type")
agg_by_solution_source = aggregation_hook(BENCHMARK, "agg_by_solution_source")
