"""lmms-eval's `!function` hooks for the virectify tasks: the benchmark lives in lmms_eval_plugins.benchmarks.virectify."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.virectify import tasks as _tasks
from lmms_eval_plugins.prefetch import prefetched
from lmms_eval_plugins.benchmarks.virectify.tasks import (  # noqa: F401  (named by the task YAMLs)
    agg_skipped,
    agg_skipped_by_reason,
    JudgeFilter,
    agg_acc_i,
    agg_acc_r,
    agg_acc_r_error_identify,
    agg_acc_r_judge_errors,
    agg_acc_r_rationale,
    agg_answer_parse_fail,
    agg_by_domain,
    agg_by_error_type,
    agg_by_solution_source,
    agg_format_rate,
    agg_graph_jaccard,
    agg_iou,
    agg_parse_fail,
    agg_unscored,
    doc_to_messages as _doc_to_messages,
    doc_to_text,
    doc_to_visual as _doc_to_visual,
    judge_item,
    process_docs,
    process_docs_reflect,
    process_results,
    process_results_reflect,
)

# The bundled sample data beside the YAMLs lmms-eval loaded (also right in an exported task folder).
_tasks.SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# Frames of the next requests are decoded while the model answers this one (docs/frame-cache.md).
doc_to_messages = prefetched(_doc_to_messages)
doc_to_visual = prefetched(_doc_to_visual)
