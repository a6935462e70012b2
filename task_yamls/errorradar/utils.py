"""lmms-eval's `!function utils.*` hooks for the errorradar tasks, generated from the spec and
hooks of lmms_eval_plugins.benchmarks.errorradar (lmms_eval_plugins/task_hooks.py):
edit those, then run `lmms-eval-plugins sync-yaml errorradar`, which rewrites this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.errorradar import tasks
from lmms_eval_plugins.benchmarks.errorradar.spec import BENCHMARK
from lmms_eval_plugins.task_hooks import aggregation_hook, with_sample_dir

SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# the benchmark's hooks (tasks.HOOKS)
process_docs_step = with_sample_dir(tasks.process_docs_step, SAMPLE_DIR)
process_docs_cate = with_sample_dir(tasks.process_docs_cate, SAMPLE_DIR)
doc_to_visual = tasks.doc_to_visual
doc_to_text_step = tasks.doc_to_text_step
doc_to_text_cate = tasks.doc_to_text_cate
doc_to_messages_step = tasks.doc_to_messages_step
doc_to_messages_cate = tasks.doc_to_messages_cate
process_results_step = tasks.process_results_step
process_results_cate = tasks.process_results_cate

# one aggregation per metric hook of the spec
agg_cate_acc = aggregation_hook(BENCHMARK, "agg_cate_acc")
agg_cate_macro_precision = aggregation_hook(BENCHMARK, "agg_cate_macro_precision")
agg_cate_macro_recall = aggregation_hook(BENCHMARK, "agg_cate_macro_recall")
agg_cate_macro_f1 = aggregation_hook(BENCHMARK, "agg_cate_macro_f1")
agg_cate_f1_vis = aggregation_hook(BENCHMARK, "agg_cate_f1_vis")
agg_cate_f1_cal = aggregation_hook(BENCHMARK, "agg_cate_f1_cal")
agg_cate_f1_reas = aggregation_hook(BENCHMARK, "agg_cate_f1_reas")
agg_cate_f1_know = aggregation_hook(BENCHMARK, "agg_cate_f1_know")
agg_cate_f1_mis = aggregation_hook(BENCHMARK, "agg_cate_f1_mis")
agg_cate_precision_vis = aggregation_hook(BENCHMARK, "agg_cate_precision_vis")
agg_cate_precision_cal = aggregation_hook(BENCHMARK, "agg_cate_precision_cal")
agg_cate_precision_reas = aggregation_hook(BENCHMARK, "agg_cate_precision_reas")
agg_cate_precision_know = aggregation_hook(BENCHMARK, "agg_cate_precision_know")
agg_cate_precision_mis = aggregation_hook(BENCHMARK, "agg_cate_precision_mis")
agg_cate_recall_vis = aggregation_hook(BENCHMARK, "agg_cate_recall_vis")
agg_cate_recall_cal = aggregation_hook(BENCHMARK, "agg_cate_recall_cal")
agg_cate_recall_reas = aggregation_hook(BENCHMARK, "agg_cate_recall_reas")
agg_cate_recall_know = aggregation_hook(BENCHMARK, "agg_cate_recall_know")
agg_cate_recall_mis = aggregation_hook(BENCHMARK, "agg_cate_recall_mis")
agg_cate_parse_fail = aggregation_hook(BENCHMARK, "agg_cate_parse_fail")
agg_cate_pred_distribution = aggregation_hook(BENCHMARK, "agg_cate_pred_distribution")
agg_cate_acc_by_question_type = aggregation_hook(BENCHMARK, "agg_cate_acc_by_question_type")
agg_cate_confusion = aggregation_hook(BENCHMARK, "agg_cate_confusion")
agg_skipped = aggregation_hook(BENCHMARK, "agg_skipped")
agg_unscored = aggregation_hook(BENCHMARK, "agg_unscored")
agg_skipped_by_reason = aggregation_hook(BENCHMARK, "agg_skipped_by_reason")
agg_step_acc = aggregation_hook(BENCHMARK, "agg_step_acc")
agg_step_parse_fail = aggregation_hook(BENCHMARK, "agg_step_parse_fail")
agg_step_acc_by_question_type = aggregation_hook(BENCHMARK, "agg_step_acc_by_question_type")
agg_cate_acc_std = aggregation_hook(BENCHMARK, "agg_cate_acc_std")
agg_cate_macro_precision_std = aggregation_hook(BENCHMARK, "agg_cate_macro_precision_std")
agg_cate_macro_recall_std = aggregation_hook(BENCHMARK, "agg_cate_macro_recall_std")
agg_cate_macro_f1_std = aggregation_hook(BENCHMARK, "agg_cate_macro_f1_std")
agg_cate_f1_vis_std = aggregation_hook(BENCHMARK, "agg_cate_f1_vis_std")
agg_cate_f1_cal_std = aggregation_hook(BENCHMARK, "agg_cate_f1_cal_std")
agg_cate_f1_reas_std = aggregation_hook(BENCHMARK, "agg_cate_f1_reas_std")
agg_cate_f1_know_std = aggregation_hook(BENCHMARK, "agg_cate_f1_know_std")
agg_cate_f1_mis_std = aggregation_hook(BENCHMARK, "agg_cate_f1_mis_std")
agg_cate_precision_vis_std = aggregation_hook(BENCHMARK, "agg_cate_precision_vis_std")
agg_cate_precision_cal_std = aggregation_hook(BENCHMARK, "agg_cate_precision_cal_std")
agg_cate_precision_reas_std = aggregation_hook(BENCHMARK, "agg_cate_precision_reas_std")
agg_cate_precision_know_std = aggregation_hook(BENCHMARK, "agg_cate_precision_know_std")
agg_cate_precision_mis_std = aggregation_hook(BENCHMARK, "agg_cate_precision_mis_std")
agg_cate_recall_vis_std = aggregation_hook(BENCHMARK, "agg_cate_recall_vis_std")
agg_cate_recall_cal_std = aggregation_hook(BENCHMARK, "agg_cate_recall_cal_std")
agg_cate_recall_reas_std = aggregation_hook(BENCHMARK, "agg_cate_recall_reas_std")
agg_cate_recall_know_std = aggregation_hook(BENCHMARK, "agg_cate_recall_know_std")
agg_cate_recall_mis_std = aggregation_hook(BENCHMARK, "agg_cate_recall_mis_std")
agg_cate_pred_distribution_std = aggregation_hook(BENCHMARK, "agg_cate_pred_distribution_std")
agg_cate_acc_by_question_type_std = aggregation_hook(BENCHMARK, "agg_cate_acc_by_question_type_std")
agg_cate_confusion_std = aggregation_hook(BENCHMARK, "agg_cate_confusion_std")
agg_step_acc_std = aggregation_hook(BENCHMARK, "agg_step_acc_std")
agg_step_acc_by_question_type_std = aggregation_hook(BENCHMARK, "agg_step_acc_by_question_type_std")
