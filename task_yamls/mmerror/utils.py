"""lmms-eval's `!function` hooks for the mmerror tasks: the benchmark lives in lmms_eval_plugins.benchmarks.mmerror."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.mmerror import tasks as _tasks
from lmms_eval_plugins.benchmarks.mmerror.tasks import (  # noqa: F401  (named by the task YAMLs)
    agg_accuracy,
    agg_accuracy_by_domain,
    agg_accuracy_by_label,
    agg_accuracy_by_subdomain,
    agg_accuracy_domain_macro,
    agg_confusion,
    agg_false_alarm_rate,
    agg_no_error_rate,
    agg_official_accuracy,
    agg_official_parse_fail,
    agg_official_strict_accuracy,
    agg_parse_fail,
    agg_pred_distribution,
    agg_presence_parse_fail,
    agg_skipped,
    agg_skipped_by_reason,
    agg_unscored,
    doc_to_messages_epd,
    doc_to_messages_etc,
    doc_to_text_epd,
    doc_to_text_etc,
    doc_to_visual,
    process_docs_epd,
    process_docs_etc,
    process_results_epd,
    process_results_etc,
)

# The bundled sample data beside the YAMLs lmms-eval loaded (also right in an exported task folder).
_tasks.SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"
