"""lmms-eval's `!function` hooks for the crossvid tasks: the benchmark lives in lmms_eval_plugins.benchmarks.crossvid."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.crossvid import tasks as _tasks
from lmms_eval_plugins.prefetch import prefetched
from lmms_eval_plugins.benchmarks.crossvid.tasks import (  # noqa: F401  (named by the task YAMLs)
    JudgeFilter,
    agg_ccqa_per_question_mean,
    agg_ccqa_score,
    agg_judge_errors,
    agg_official_dropped,
    agg_parse_fail,
    agg_reversed,
    agg_score,
    agg_score_strict,
    agg_skipped,
    agg_skipped_by_reason,
    agg_unscored,
    doc_to_messages as _doc_to_messages,
    doc_to_text,
    doc_to_visual as _doc_to_visual,
    group_mean,
    judge_item,
    process_docs_bu,
    process_docs_cc,
    process_docs_ccqa,
    process_docs_fsa,
    process_docs_moc,
    process_docs_msr,
    process_docs_nc,
    process_docs_pea,
    process_docs_pi,
    process_docs_pss,
    process_results,
    process_results_ccqa,
)

# The bundled sample data beside the YAMLs lmms-eval loaded (also right in an exported task folder).
_tasks.SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# Frames of the next requests are decoded while the model answers this one (docs/frame-cache.md).
doc_to_messages = prefetched(_doc_to_messages)
doc_to_visual = prefetched(_doc_to_visual)
