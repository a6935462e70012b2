"""lmms-eval's `!function` hooks for the causalstep tasks: the benchmark lives in lmms_eval_plugins.benchmarks.causalstep."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.causalstep import tasks as _tasks
from lmms_eval_plugins.prefetch import prefetched
from lmms_eval_plugins.benchmarks.causalstep.tasks import (  # noqa: F401  (named by the task YAMLs)
    agg_skipped,
    agg_skipped_by_reason,
    ChainReplayFilter,
    agg_amcl,
    agg_by_category,
    agg_csr,
    agg_dua,
    agg_icra,
    agg_incomplete_videos,
    agg_mcl,
    agg_parse_fail,
    agg_rf,
    agg_unscored,
    agg_videos,
    agg_ws,
    agg_ws_max,
    doc_to_messages as _doc_to_messages,
    doc_to_text,
    doc_to_visual as _doc_to_visual,
    process_docs,
    process_results,
)

# The bundled sample data beside the YAMLs lmms-eval loaded (also right in an exported task folder).
_tasks.SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# Frames of the next requests are decoded while the model answers this one (docs/frame-cache.md).
doc_to_messages = prefetched(_doc_to_messages)
doc_to_visual = prefetched(_doc_to_visual)
