"""lmms-eval's `!function utils.*` hooks for the mmerror tasks, generated from the spec and
hooks of lmms_eval_plugins.benchmarks.mmerror (lmms_eval_plugins/task_hooks.py):
edit those, then run `lmms-eval-plugins sync-yaml mmerror`, which rewrites this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.mmerror import tasks
from lmms_eval_plugins.benchmarks.mmerror.spec import BENCHMARK
from lmms_eval_plugins.task_hooks import aggregation_hook, with_sample_dir

SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# the benchmark's hooks (tasks.HOOKS)
process_docs_etc = with_sample_dir(tasks.process_docs_etc, SAMPLE_DIR)
process_docs_epd = with_sample_dir(tasks.process_docs_epd, SAMPLE_DIR)
doc_to_visual = tasks.doc_to_visual
doc_to_text_etc = tasks.doc_to_text_etc
doc_to_text_epd = tasks.doc_to_text_epd
doc_to_messages_etc = tasks.doc_to_messages_etc
doc_to_messages_epd = tasks.doc_to_messages_epd
process_results_etc = tasks.process_results_etc
process_results_epd = tasks.process_results_epd

# one aggregation per metric hook of the spec
agg_accuracy = aggregation_hook(BENCHMARK, "agg_accuracy")
agg_parse_fail = aggregation_hook(BENCHMARK, "agg_parse_fail")
agg_official_accuracy = aggregation_hook(BENCHMARK, "agg_official_accuracy")
agg_official_strict_accuracy = aggregation_hook(BENCHMARK, "agg_official_strict_accuracy")
agg_official_parse_fail = aggregation_hook(BENCHMARK, "agg_official_parse_fail")
agg_accuracy_domain_macro = aggregation_hook(BENCHMARK, "agg_accuracy_domain_macro")
agg_accuracy_by_domain = aggregation_hook(BENCHMARK, "agg_accuracy_by_domain")
agg_accuracy_by_subdomain = aggregation_hook(BENCHMARK, "agg_accuracy_by_subdomain")
agg_accuracy_by_label = aggregation_hook(BENCHMARK, "agg_accuracy_by_label")
agg_confusion = aggregation_hook(BENCHMARK, "agg_confusion")
agg_pred_distribution = aggregation_hook(BENCHMARK, "agg_pred_distribution")
agg_no_error_rate = aggregation_hook(BENCHMARK, "agg_no_error_rate")
agg_false_alarm_rate = aggregation_hook(BENCHMARK, "agg_false_alarm_rate")
agg_presence_parse_fail = aggregation_hook(BENCHMARK, "agg_presence_parse_fail")
agg_skipped = aggregation_hook(BENCHMARK, "agg_skipped")
agg_unscored = aggregation_hook(BENCHMARK, "agg_unscored")
agg_skipped_by_reason = aggregation_hook(BENCHMARK, "agg_skipped_by_reason")
