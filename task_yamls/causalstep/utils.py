"""lmms-eval's `!function utils.*` hooks for the causalstep tasks, generated from the spec and
hooks of lmms_eval_plugins.benchmarks.causalstep (lmms_eval_plugins/task_hooks.py):
edit those, then run `lmms-eval-plugins sync-yaml causalstep`, which rewrites this file."""

from pathlib import Path

from lmms_eval_plugins.benchmarks.causalstep import tasks
from lmms_eval_plugins.benchmarks.causalstep.spec import BENCHMARK
from lmms_eval_plugins.task_hooks import aggregation_hook, with_sample_dir

SAMPLE_DIR = Path(__file__).resolve().parent / "sample_data"

# the benchmark's hooks (tasks.HOOKS)
process_docs = with_sample_dir(tasks.process_docs, SAMPLE_DIR)
doc_to_visual = tasks.doc_to_visual
doc_to_text = tasks.doc_to_text
doc_to_messages = tasks.doc_to_messages
process_results = tasks.process_results
ChainReplayFilter = tasks.ChainReplayFilter

# one aggregation per metric hook of the spec
agg_csr = aggregation_hook(BENCHMARK, "agg_csr")
agg_amcl = aggregation_hook(BENCHMARK, "agg_amcl")
agg_mcl = aggregation_hook(BENCHMARK, "agg_mcl")
agg_rf = aggregation_hook(BENCHMARK, "agg_rf")
agg_ws = aggregation_hook(BENCHMARK, "agg_ws")
agg_ws_max = aggregation_hook(BENCHMARK, "agg_ws_max")
agg_dua = aggregation_hook(BENCHMARK, "agg_dua")
agg_icra = aggregation_hook(BENCHMARK, "agg_icra")
agg_parse_fail = aggregation_hook(BENCHMARK, "agg_parse_fail")
agg_by_category = aggregation_hook(BENCHMARK, "agg_by_category")
agg_videos = aggregation_hook(BENCHMARK, "agg_videos")
agg_incomplete_videos = aggregation_hook(BENCHMARK, "agg_incomplete_videos")
agg_skipped = aggregation_hook(BENCHMARK, "agg_skipped")
agg_unscored = aggregation_hook(BENCHMARK, "agg_unscored")
agg_skipped_by_reason = aggregation_hook(BENCHMARK, "agg_skipped_by_reason")
