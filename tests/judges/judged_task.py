"""A minimal judged task folder (YAML, utils.py, data) for CLI tests of the judge filter."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

UTILS = """
from lmms_eval_plugins.judges import JudgeFilter, JudgeItem, aggregate_judged, judged_mean, judged_parts

def doc_to_visual(doc):
    return []

def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return doc["question"]

def judge_item(response, doc):
    return JudgeItem(question=doc["question"], prediction=response, reference=doc["answer"],
                     scoring_points=doc.get("points") or None)

def process_results(doc, results):
    _, outcome = judged_parts(results)
    return {"METRIC": outcome.to_dict(), "judge_errors": outcome.to_dict()}

def agg_METRIC(items):
    return aggregate_judged(items, metric="METRIC")

def agg_judge_errors(items):  # the samples left without a verdict (judge errors, or no judge asked)
    return judged_mean(items).n_without_verdict
"""


def write_judged_task(
    folder: Path, task: str, docs: Sequence[dict[str, Any]], *, judge: str, metric: str, max_new_tokens: int
) -> Path:
    """``folder`` holding task ``task`` over ``docs``, judged by ``judge`` into ``metric`` and ``judge_errors``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data.json").write_text(json.dumps(list(docs)))
    (folder / "utils.py").write_text(UTILS.replace("METRIC", metric))
    (folder / f"{task}.yaml").write_text(
        textwrap.dedent(
            f"""
        task: {task}
        dataset_path: json
        dataset_kwargs:
          data_files:
            test: {folder / "data.json"}
        test_split: test
        output_type: generate_until
        doc_to_visual: !function utils.doc_to_visual
        doc_to_text: !function utils.doc_to_text
        doc_to_target: answer
        generation_kwargs:
          max_new_tokens: {max_new_tokens}
          temperature: 0
          do_sample: false
        filter_list:
          - name: none
            filter:
              - function: !function utils.JudgeFilter
                judge: {judge}
                default_model: gpt-4o
                item_fn: !function utils.judge_item
        process_results: !function utils.process_results
        metric_list:
          - metric: {metric}
            aggregation: !function utils.agg_{metric}
            higher_is_better: true
          - metric: judge_errors
            aggregation: !function utils.agg_judge_errors
            higher_is_better: false
        metadata:
          version: 0.1
        """
        )
    )
    return folder
