"""lmms-eval's `!function utils.*` hooks for the crossvid tasks, generated from the spec and
hooks of lmms_eval_plugins.benchmarks.crossvid (lmms_eval_plugins/task_hooks.py):
edit those, then run `lmms-eval-plugins sync-yaml crossvid`, which rewrites this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.crossvid import tasks
from lmms_eval_plugins.benchmarks.crossvid.spec import BENCHMARK
from lmms_eval_plugins.task_hooks import aggregation_hook, with_sample_dir

SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# the benchmark's hooks (tasks.HOOKS)
process_docs_bu = with_sample_dir(tasks.process_docs_bu, SAMPLE_DIR)
process_docs_nc = with_sample_dir(tasks.process_docs_nc, SAMPLE_DIR)
process_docs_cc = with_sample_dir(tasks.process_docs_cc, SAMPLE_DIR)
process_docs_pea = with_sample_dir(tasks.process_docs_pea, SAMPLE_DIR)
process_docs_pi = with_sample_dir(tasks.process_docs_pi, SAMPLE_DIR)
process_docs_fsa = with_sample_dir(tasks.process_docs_fsa, SAMPLE_DIR)
process_docs_pss = with_sample_dir(tasks.process_docs_pss, SAMPLE_DIR)
process_docs_msr = with_sample_dir(tasks.process_docs_msr, SAMPLE_DIR)
process_docs_moc = with_sample_dir(tasks.process_docs_moc, SAMPLE_DIR)
process_docs_ccqa = with_sample_dir(tasks.process_docs_ccqa, SAMPLE_DIR)
doc_to_visual = tasks.doc_to_visual
doc_to_text = tasks.doc_to_text
doc_to_messages = tasks.doc_to_messages
process_results = tasks.process_results
process_results_ccqa = tasks.process_results_ccqa
JudgeFilter = tasks.JudgeFilter
judge_item = tasks.judge_item
group_mean = tasks.group_mean

# one aggregation per metric hook of the spec
agg_ccqa_score = aggregation_hook(BENCHMARK, "agg_ccqa_score")
agg_ccqa_per_question_mean = aggregation_hook(BENCHMARK, "agg_ccqa_per_question_mean")
agg_judge_errors = aggregation_hook(BENCHMARK, "agg_judge_errors")
agg_ccqa_official_nan = aggregation_hook(BENCHMARK, "agg_ccqa_official_nan")
agg_skipped = aggregation_hook(BENCHMARK, "agg_skipped")
agg_unscored = aggregation_hook(BENCHMARK, "agg_unscored")
agg_skipped_by_reason = aggregation_hook(BENCHMARK, "agg_skipped_by_reason")
agg_score = aggregation_hook(BENCHMARK, "agg_score")
agg_score_strict = aggregation_hook(BENCHMARK, "agg_score_strict")
agg_parse_fail = aggregation_hook(BENCHMARK, "agg_parse_fail")
agg_reversed = aggregation_hook(BENCHMARK, "agg_reversed")
agg_official_dropped = aggregation_hook(BENCHMARK, "agg_official_dropped")
agg_official_nan = aggregation_hook(BENCHMARK, "agg_official_nan")
