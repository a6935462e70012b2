"""ViRectify: video reasoning correction (error identification, error graph, key timestamps, corrected answer).

Two tasks share this file (see README.md for the protocol, the parsing rules and every decision):

- ``virectify``: the model gets 32 timestamped frames, the question and an erroneous step-by-step
  solution, and answers in the format of the paper's Tables 9-11. Scored by ``acc_i`` (step-label
  accuracy), ``iou`` (temporal IoU of the key timestamps), ``acc_r`` (the ``semantic_match`` judge on
  the boxed corrected answer), ``graph_jaccard`` (edge-set Jaccard of the error-propagation graphs,
  the paper's Eq. 1) and ``format_rate``, with breakdowns by domain, error type and solution source.
- ``virectify_reflect``: the reflection setting of the paper's section 6.3. The model gets the
  question, the frames, the erroneous solution and either an error identification or a rationale
  (with its final answer removed), and must answer the question; scored by the same judge.

Parsers are pure and never raise: a missing or broken part of an output scores 0 on its own metric
only, and the logged sample says what was missing.
The package, one job a module: ``replies`` (reading the four parts of a reply and the boxed answer),
``records`` (validating records and videos, task options), ``prompts`` (instructions, frame labels, the
request hooks), ``scoring`` (per-sample scores, the judge item, aggregations), ``hints`` (reflection
hints: gold, a hints file, a logged run), ``baselines`` (oracle and chance replies). This module loads a
task's docs and is what the task folder's ``utils.py`` (lmms-eval's hooks) imports from.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.virectify.baselines import (
    chance_responses,
    oracle_response,
)
from lmms_eval_plugins.benchmarks.virectify.hints import (  # noqa: F401  (re-exported: what the tests read)
    HINT_KINDS,
    HINTS_ENV,
    _hints_path,
    hints_from_samples,
    load_hints,
    render_hint,
)
from lmms_eval_plugins.benchmarks.virectify.prompts import (  # noqa: F401  (re-exported: the YAMLs' hooks, and what the tests read)
    ANSWER_SENTENCE,
    INSTRUCTION,
    OUTPUT_FORMAT,
    REFLECT_FEEDBACK,
    REFLECT_INSTRUCTION,
    REFLECT_OUTPUT_FORMAT,
    clock,
    doc_to_messages,
    doc_to_text,
    doc_to_visual,
    format_intervals,
    frame_label,
    frame_times,
    prompt_text,
)
from lmms_eval_plugins.benchmarks.virectify.records import (  # noqa: F401  (re-exported: what the tests read)
    BENCHMARK,
    DEFAULT_MAX_LONG_SIDE,
    DEFAULT_NUM_FRAMES,
    DOMAIN_ALIASES,
    DOMAINS,
    ERROR_TYPE_ALIASES,
    ERROR_TYPES,
    JSONL_NAME,
    LOCAL_LAYOUT,
    REQUIRED_FIELDS,
    VISUAL_MODES,
    _common_fields,
    _options,
    load_records,
    normalize_record,
)
from lmms_eval_plugins.benchmarks.virectify.replies import (  # noqa: F401  (re-exported: what the tests read)
    PARTS,
    find_answer,
    graph_edges,
    key_times,
    label_value,
    literal_dict,
    parse_graph,
    parse_response,
    parse_step_labels,
    redact_answer,
    step_number,
)
from lmms_eval_plugins.benchmarks.virectify.scoring import (  # noqa: F401  (re-exported: the YAMLs' hooks, and what the tests read)
    JUDGED_METRICS,
    METRICS,
    REFLECT_JUDGED_METRICS,
    REFLECT_METRICS,
    TOTAL,
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
    graph_jaccard,
    judge_item,
    judged_value,
    process_results,
    process_results_reflect,
    score_response,
    step_accuracy,
    timestamp_iou,
)
from lmms_eval_plugins.data import (
    DataSource,
    resolve_source,
    source_spec,
    stamp_skipped,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.judges import JudgeFilter  # noqa: F401  (used by the task YAMLs)
from lmms_eval_plugins.outcome import (  # noqa: F401 (agg_skipped*: hooks of the task YAMLs)
    agg_skipped,
    agg_skipped_by_reason,
    guard_aggregations,
)
from lmms_eval_plugins.tasking import CHANCE_FIELD, ORACLE_FIELD

# The bundled sample data: set by the task folder's utils.py to the folder beside the YAMLs lmms-eval
# loaded (an installed or an exported task folder alike).
SAMPLE_DIR: Path | None = None


# ----------------------------------------------------------------------------------------------- loading

def _load(dataset: Any) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], DataSource]:
    spec = source_spec(dataset)
    source = resolve_source(BENCHMARK, spec.get("source", "auto"), sample_dir=SAMPLE_DIR, hub_repo=None,
                            local_layout=LOCAL_LAYOUT)
    return load_records(source), _options(spec), spec, source


def process_docs(dataset: Any):
    records, options, _, _ = _load(dataset)
    docs = []
    for r in records:
        docs.append({
            **_common_fields(r, options),
            "gold_labels": json.dumps({str(k): v for k, v in sorted(r["labels"].items())}),
            "gold_edges": json.dumps(sorted(r["edges"])),
            "gold_timestamps": json.dumps(r["intervals"]),
            ORACLE_FIELD: oracle_response(r),
            CHANCE_FIELD: chance_responses(len(r["solution"])),
        })
    return to_dataset(stamp_skipped(docs, records))


def process_docs_reflect(dataset: Any):
    records, options, spec, source = _load(dataset)
    kinds = list(spec.get("hints", HINT_KINDS))
    if not kinds or any(k not in HINT_KINDS for k in kinds):
        raise DataError(f"bad task option hints={kinds!r}", fix=f"a list drawn from {', '.join(HINT_KINDS)}")
    path = _hints_path(spec, source)
    provided = load_hints(path, [r["id"] for r in records]) if path is not None else None
    docs = []
    for r in records:
        given = provided[r["id"]] if provided is not None else None
        for kind in kinds:
            if given is None:
                hint = render_hint(kind, r["error_identify"], r["rationale"], r["intervals"])
            else:
                hint = render_hint(kind, given.get("error_identify"), given.get("rationale"), given.get("timestamps"))
            docs.append({
                **_common_fields(r, options), "hint_kind": kind, "hint": hint,
                "hint_source": "gold" if given is None else str(path),
                ORACLE_FIELD: f"<answer>{ANSWER_SENTENCE.format(answer=r['answer'])}</answer>",
                CHANCE_FIELD: [f"<answer>{ANSWER_SENTENCE.format(answer=c)}</answer>" for c in "ABCD"],
            })
    return to_dataset(stamp_skipped(docs, records))


guard_aggregations(globals())  # agg_skipped, agg_skipped_by_reason as the YAMLs name them here
