"""Benchmark: ViRectify scoring and aggregation at the full benchmark's size (30,000 records).

    python bench/bench_virectify.py [--records 30000] [--seed 0] [--json OUT]

Builds N synthetic docs in the form ``process_docs`` gives them (3-9 steps, 1-3 key intervals, an
error graph, the three domains, four error types and five solution sources) and one model output per
doc: a mix of perfect answers, partly wrong ones (labels flipped, intervals shifted, graph edges
changed, overlapping intervals, a cycle), outputs with missing or broken parts (no ``<timestamps>``,
Python-style quotes and trailing commas, curly quotes, a cut-off dict, no boxed answer) and plain
noise, each padded with ~1 KB of rationale text. The judge verdicts are attached to each output as
``JudgeFilter`` attaches them (a cached verdict, a judge error on 2% of outputs, "nothing to judge"
when there is no boxed answer), so no judge is called: what is timed is the task's own
``process_results`` on every doc, then every aggregation function of the YAML, in one Python thread.
CPU time (``time.process_time``) is the figure to read on a shared machine; wall time is printed too
(pin the process with ``taskset -c 0`` to keep it on one core). Prints a Markdown table; ``--json OUT``
writes the figures.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path
from typing import Any

from lmms_eval_plugins.benchmarks.virectify.spec import TEMPLATE
from lmms_eval_plugins.judges import JudgeOutcome

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test kit (tests/testkit)
from testkit.task_utils import load_task_utils

vr = load_task_utils("virectify")
SOURCES = ("gpt-4o-injection", "Qwen2.5-VL-7B", "InternVL3-8B", "GLM-4.1V-9B-Thinking", "MiMo-VL-7B-RL")
FILLER = (
    "At {a} the video shows the object moving across the table, which contradicts the claim in the "
    "solution; the later steps inherit this mistake and the conclusion does not follow. "
) * 5


def make_doc(i: int, rng: random.Random) -> dict[str, Any]:
    n = rng.randint(3, 9)
    first_wrong = rng.randint(1, n)
    labels = {str(k): "1" if k < first_wrong else "0" for k in range(1, n + 1)}
    edges = [[first_wrong, first_wrong]] + [[k - 1, k] for k in range(first_wrong + 1, n + 1)]
    start = rng.uniform(0, 100)
    stamps = [
        [round(start + 15 * j, 1), round(start + 15 * j + rng.uniform(2, 12), 1)] for j in range(rng.randint(1, 3))
    ]
    return {
        "id": f"vr-{i:06d}",
        "video_path": f"videos/{i}.mp4",
        "source_video": f"videos/{i}.mp4",
        "domain": rng.choice(list(vr.DOMAINS)),
        "error_type": rng.choice(list(vr.ERROR_TYPES)),
        "solution_source": rng.choice(SOURCES),
        "source": "",
        "question": f"Question {i}?",
        "answer": rng.choice("ABCD"),
        "solution": [f"Step {k}: ..." for k in range(1, n + 1)],
        "num_frames": 32,
        "max_long_side": 448,
        "visual_mode": "interleaved",
        **vr.gold_columns(
            {"labels": {int(k): v for k, v in labels.items()}, "edges": {tuple(e) for e in edges}, "intervals": stamps}
        ),
        "skipped_records": [],
    }  # every doc carries the run's skipped counts (data.stamp_skipped)


def make_output(doc: dict[str, Any], rng: random.Random) -> str:
    gold = vr.gold_of(doc)
    labels = {str(k): v for k, v in sorted(gold.labels.items())}
    edges, stamps = sorted(gold.edges), list(gold.intervals)
    kind = rng.random()
    if kind < 0.25:  # partly wrong: a flipped label, a shifted and an overlapping interval, a cycle
        k = rng.choice(list(labels))
        labels = {**labels, k: "1" if labels[k] == "0" else "0"}
        stamps = [(s + 2, e + 3) for s, e in stamps] + [(stamps[0][0] + 1, stamps[0][1] + 1)]
        edges = edges + [(edges[-1][1], edges[-1][0])]
    identify = {f"step{k}": [v, "" if v == "1" else "why"] for k, v in labels.items()}
    graph: dict[str, list[str]] = {}
    for s, t in edges:
        graph.setdefault(f"step{t}", []).append(f"step{s}")
    identify_text, graph_text = json.dumps(identify), json.dumps(graph)
    if 0.25 <= kind < 0.45:  # Python quotes, trailing commas, "Step N" keys
        identify_text = repr({f"Step {k}": v for k, v in identify.items()})[:-1] + ",}"
        graph_text = repr(graph).replace("'step", "'Step ")
    elif 0.45 <= kind < 0.5:  # curly quotes, a dict cut off mid-way (regex fallback)
        identify_text = identify_text.replace('"', "\u2019")[: max(20, len(identify_text) // 2)]
    stamps_text = ",".join(f"[{vr.clock(s)}-{vr.clock(e)}]" for s, e in stamps)
    answer = doc["answer"] if rng.random() < 0.6 else rng.choice("ABCD")
    rationale = FILLER.format(a=vr.clock(stamps[0][0]))
    parts = [
        f"<error_identify>{identify_text}</error_identify>",
        f"<error_graph>{graph_text}</error_graph>",
        f"<timestamps>{stamps_text}</timestamps>",
        f"<rationale>{rationale}<answer>The correct answer should be \\boxed{{{answer}}}</answer></rationale>",
    ]
    if 0.5 <= kind < 0.6:
        del parts[2]  # no <timestamps>
    elif 0.6 <= kind < 0.65:
        parts[3] = f"<rationale>{rationale} The correct answer should be {answer}.</rationale>"  # no box
    elif kind >= 0.95:
        return "I think the solution is fine. " + rationale  # noise
    return "<think>Let me check each step.</think>" + " ".join(parts) if kind < 0.1 else " ".join(parts)


def judged(text: str, doc: dict[str, Any], rng: random.Random) -> list[dict[str, Any]]:
    """What JudgeFilter hands process_results: [{"text", "judge"}], the verdict from the cache."""
    item = vr.judge_item(text, doc)
    if item is None:
        outcome = JudgeOutcome("semantic_match", "1", "gpt-4o", skipped=True, detail={"reason": "nothing to judge"})
    elif rng.random() < 0.02:
        outcome = JudgeOutcome("semantic_match", "1", "gpt-4o", error="HTTP 500 after 6 attempts")
    else:
        outcome = JudgeOutcome(
            "semantic_match",
            "1",
            "gpt-4o",
            verdict=float(item.prediction == item.reference),
            detail={"reply": "1"},
            cached=True,
        )
    return [{"text": text, "judge": outcome.to_dict()}]


def run(n: int, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    docs = [make_doc(i, rng) for i in range(n)]
    results = [judged(make_output(d, rng), d, rng) for d in docs]
    chars = sum(len(r[0]["text"]) for r in results)

    wall, cpu = time.perf_counter(), time.process_time()
    per_doc = [vr.process_results(d, r) for d, r in zip(docs, results)]
    t_process, c_process = time.perf_counter() - wall, time.process_time() - cpu

    timings, values = {}, {}
    wall, cpu = time.perf_counter(), time.process_time()
    for metric in (m.name for m in TEMPLATE):  # the spec's metric list of the virectify tasks
        items = [x[metric] for x in per_doc]
        start = time.process_time()
        values[metric] = getattr(vr, f"agg_{metric}")(items)
        timings[metric] = time.process_time() - start
    t_aggregate, c_aggregate = time.perf_counter() - wall, time.process_time() - cpu
    return {
        "records": n,
        "output_chars_mean": chars / n,
        "process_results_cpu_s": c_process,
        "process_results_wall_s": t_process,
        "aggregation_cpu_s": c_aggregate,
        "aggregation_wall_s": t_aggregate,
        "aggregation_cpu_s_by_metric": timings,
        "total_cpu_s": c_process + c_aggregate,
        "total_wall_s": t_process + t_aggregate,
        "records_per_cpu_s": n / (c_process + c_aggregate),
        "metrics": {
            k: values[k]
            for k in ("acc_i", "iou", "acc_r", "graph_jaccard", "format_rate", "acc_r_judge_errors", "parse_fail")
        },
        "python": sys.version.split()[0],
        "machine": platform.platform(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=None, help="write the figures to this file")
    args = parser.parse_args(argv)
    r = run(args.records, args.seed)
    print(
        f"ViRectify scoring, {r['records']:,} synthetic records (mean output {r['output_chars_mean']:.0f} chars), "
        f"cached judge verdicts, one core (Python {r['python']})\n"
    )
    print("| stage | CPU s | wall s | CPU µs per record |\n|---|---:|---:|---:|")
    for name, key in (
        ("process_results (parse + score)", "process_results"),
        ("all 10 aggregations", "aggregation"),
        ("total", "total"),
    ):
        cpu, wall = r[f"{key}_cpu_s"], r[f"{key}_wall_s"]
        print(f"| {name} | {cpu:.2f} | {wall:.2f} | {1e6 * cpu / r['records']:.0f} |")
    print(
        f"\nthroughput: {r['records_per_cpu_s']:,.0f} records per CPU second; metrics: "
        + ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in r["metrics"].items())
    )
    if args.json:
        args.json.write_text(json.dumps(r, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
