"""lmms-eval's `!function` hooks for the errorradar tasks: the benchmark lives in lmms_eval_plugins.benchmarks.errorradar."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.errorradar import tasks as _tasks
from lmms_eval_plugins.benchmarks.errorradar.tasks import (  # noqa: F401  (named by the task YAMLs)
    agg_cate_acc, agg_cate_acc_by_question_type, agg_cate_acc_by_question_type_std, agg_cate_acc_std,
    agg_cate_confusion, agg_cate_confusion_std, agg_cate_f1_cal, agg_cate_f1_cal_std, agg_cate_f1_know,
    agg_cate_f1_know_std, agg_cate_f1_mis, agg_cate_f1_mis_std, agg_cate_f1_reas, agg_cate_f1_reas_std,
    agg_cate_f1_vis, agg_cate_f1_vis_std, agg_cate_macro_f1, agg_cate_macro_f1_std, agg_cate_macro_precision,
    agg_cate_macro_precision_std, agg_cate_macro_recall, agg_cate_macro_recall_std, agg_cate_parse_fail,
    agg_cate_precision_cal, agg_cate_precision_cal_std, agg_cate_precision_know, agg_cate_precision_know_std,
    agg_cate_precision_mis, agg_cate_precision_mis_std, agg_cate_precision_reas, agg_cate_precision_reas_std,
    agg_cate_precision_vis, agg_cate_precision_vis_std, agg_cate_pred_distribution, agg_cate_pred_distribution_std,
    agg_cate_recall_cal, agg_cate_recall_cal_std, agg_cate_recall_know, agg_cate_recall_know_std, agg_cate_recall_mis,
    agg_cate_recall_mis_std, agg_cate_recall_reas, agg_cate_recall_reas_std, agg_cate_recall_vis,
    agg_cate_recall_vis_std, agg_skipped, agg_skipped_by_reason, agg_step_acc, agg_step_acc_by_question_type,
    agg_step_acc_by_question_type_std, agg_step_acc_std, agg_step_parse_fail, agg_unscored, doc_to_messages_cate,
    doc_to_messages_step, doc_to_text_cate, doc_to_text_step, doc_to_visual, process_docs_cate, process_docs_step,
    process_results_cate, process_results_step,
)

# The bundled sample data beside the YAMLs lmms-eval loaded (also right in an exported task folder).
_tasks.SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"
