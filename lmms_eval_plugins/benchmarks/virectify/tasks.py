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
``records`` (validating records and videos, task options, the typed ``Record`` a doc carries: ``record_of``),
``prompts`` (instructions, frame labels, the request hooks), ``scoring`` (per-sample scores, the judge
item, aggregations), ``hints`` (reflection hints: gold, a hints file, a logged run), ``baselines``
(oracle and chance replies), ``spec`` (every metric with its aggregation). This module loads a task's docs, builds each scored item and names in
``HOOKS`` what the task folder's ``utils.py`` hands lmms-eval (lmms_eval_plugins/task_hooks.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.virectify import prompts, scoring, spec
from lmms_eval_plugins.benchmarks.virectify.baselines import (
    chance_responses,
    oracle_response,
    reflect_chance_responses,
    reflect_oracle_response,
)
from lmms_eval_plugins.benchmarks.virectify.hints import (  # noqa: F401  (re-exported: what the tests read)
    HINTS_ENV,
    _hints_path,
    hint_of,
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
    doc_to_text,
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
    HINT_KINDS,
    JSONL_NAME,
    LOCAL_LAYOUT,
    REQUIRED_FIELDS,
    VISUAL_MODES,
    Gold,
    Hint,
    Record,
    _options,
    gold_columns,
    gold_features,
    gold_of,
    load_records,
    normalize_record,
    record_of,
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
    edge_jaccard,
    judge_item,
)
from lmms_eval_plugins.data import (
    DataSource,
    resolve_source,
    source_spec,
    stamp_skipped,
    to_dataset,
)
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.judges import JudgeFilter as _JudgeFilter
from lmms_eval_plugins.judges import judged_parts
from lmms_eval_plugins.prefetch import prefetched
from lmms_eval_plugins.task_hooks import item_values
from lmms_eval_plugins.doc_fields import CHANCE_FIELD, ORACLE_FIELD

# The judging filter the YAMLs name, told the judge instructions of this benchmark's spec.
JudgeFilter = _JudgeFilter.for_benchmark(spec.BENCHMARK, __name__)

# What the task YAMLs name (lmms_eval_plugins/task_hooks.py adds the aggregations from the spec).
HOOKS = (
    "process_docs",
    "process_docs_reflect",
    "doc_to_visual",
    "doc_to_text",
    "doc_to_messages",
    "JudgeFilter",
    "judge_item",
    "process_results",
    "process_results_reflect",
)

# Frames of the next requests are decoded while the model answers this one (docs/frame-cache.md).
doc_to_messages = prefetched(prompts.doc_to_messages)
doc_to_visual = prefetched(prompts.doc_to_visual)


# ----------------------------------------------------------------------------------------------- loading


def _load(
    dataset: Any, sample_dir: Path | None
) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any], DataSource]:
    """``sample_dir``: the bundled sample data beside the YAMLs lmms-eval loaded (task_hooks binds it)."""
    source_of = source_spec(dataset)
    source = resolve_source(
        BENCHMARK, source_of.get("source", "auto"), sample_dir=sample_dir, hub_repo=None, local_layout=LOCAL_LAYOUT
    )
    return load_records(source), _options(source_of), source_of, source


def process_docs(dataset: Any, sample_dir: Path | None = None):
    records, options, _, _ = _load(dataset, sample_dir)
    docs, chance_by_steps = [], {}  # the chance replies depend on the step count alone: built once per count
    for r in records:
        record = Record.of(r, options)
        n_steps = len(record.solution)
        if n_steps not in chance_by_steps:
            chance_by_steps[n_steps] = chance_responses(n_steps)
        docs.append({**record.columns(), ORACLE_FIELD: oracle_response(r), CHANCE_FIELD: chance_by_steps[n_steps]})
    return to_dataset(stamp_skipped(docs, records), gold_features())


def process_docs_reflect(dataset: Any, sample_dir: Path | None = None):
    records, options, source_of, source = _load(dataset, sample_dir)
    kinds = list(source_of.get("hints", HINT_KINDS))
    if not kinds or any(k not in HINT_KINDS for k in kinds):
        raise DataError(f"bad task option hints={kinds!r}", fix=f"a list drawn from {', '.join(HINT_KINDS)}")
    path = _hints_path(source_of, source)
    provided = load_hints(path, [r["id"] for r in records]) if path is not None else None
    docs = []
    for r in records:
        given = provided[r["id"]] if provided is not None else None
        for kind in kinds:
            record = Record.of(r, options, hint=hint_of(kind, r, given, path))
            docs.append(
                {
                    **record.columns(),
                    ORACLE_FIELD: reflect_oracle_response(record),
                    CHANCE_FIELD: reflect_chance_responses(),
                }
            )
    return to_dataset(stamp_skipped(docs, records))


# ----------------------------------------------------------------------------------------------- scoring


def score_response(doc: Any, text: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the per-sample scores, what was parsed) for one response; scores are fractions 0-1."""
    return scoring.score_response(doc, text, spec.FIELDS)


def process_results(doc, results):
    text, outcome = judged_parts(results)
    item, shown = score_response(doc, text)
    scored = {**scoring.with_verdict(item, outcome, spec.FIELDS), scoring.PARSED_FIELD: shown}
    return item_values(spec.TEMPLATE, scored, [text], doc=doc, judge=outcome)


def process_results_reflect(doc, results):
    text, outcome = judged_parts(results)
    item = scoring.with_verdict(scoring.reflect_item(doc, text), outcome, spec.FIELDS)
    return item_values(spec.REFLECT_TEMPLATE, item, [text], doc=doc, judge=outcome)
