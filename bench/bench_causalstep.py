"""Benchmark: CausalStep's batched replay versus a sequential multi-round run of the same protocol.

    python bench/bench_causalstep.py [--workdir DIR] [--reps 3] [--model-args ARGS] [--json OUT]

Runs, on the bundled ``causalstep_sample`` (4 videos of 1, 3, 5 and 7 segments, 49 requests) with
lmms-eval's real chat class ``lmms_eval.models.chat.qwen2_5_vl.Qwen2_5_VL`` (by default on the tiny,
randomly initialised Qwen2.5-VL built into --workdir, on the CPU):

  batched replay      every request the protocol can ask, in one ``generate_until`` call (batch 1
                      and batch 4), then the task's filter replays each video's chain (Algorithm 1);
  sequential          the protocol asked in order, one ``generate_until`` call per question, each
                      question chosen only after the previous answer was scored (what a multi-round
                      runner does); "chain only" asks just the chain, "+ DUA + ICRA" also asks the
                      descriptive questions the chain skipped and every isolated causal question,
                      which the paper's two supplementary metrics need;
  sequential, rounds  the same, but each round asks the next question of every unfinished video in
                      one call (the most a multi-round runner can batch: one question per video).

Each timing covers model calls, frame sampling (inside the model's ``doc_to_messages`` calls) and
scoring; median wall and CPU (process) time over --reps after one warm-up, the methods interleaved
within each repetition. The script also checks that every video's chain is
the same in all runs (it must be, under greedy decoding) and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

# On a CPU, oneDNN caches its kernels per input shape (1024 by default); 49 prompts of different
# lengths times 32 greedy steps overflow it, and with the default cache the batched run measured 3x
# slower per request than the same requests asked one at a time on the 2-core machine this was
# written on. A larger cache removes that artefact. Set before torch loads oneDNN.
os.environ.setdefault("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "65536")

from lmms_eval.api.instance import Instance
from lmms_eval.utils import simple_parse_args_string

from lmms_eval_plugins.benchmarks.causalstep.protocol import replay_chain
from lmms_eval_plugins.benchmarks.causalstep.spec import TEMPLATE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test kit (tests/testkit)
from testkit.task_utils import load_task_utils
from lmms_eval_plugins.tiny_qwen import (
    build_tiny_qwen2_5_vl,
    lmms_eval_model_args,
)

TASK, SPLIT = "causalstep_sample", "test"
GEN_KWARGS = {"max_new_tokens": 32, "temperature": 0, "do_sample": False, "until": []}  # as in the task template
cs = load_task_utils("causalstep")


def load_model(model_args: str, batch_size: int):
    from lmms_eval.models.chat.qwen2_5_vl import Qwen2_5_VL

    return Qwen2_5_VL(**simple_parse_args_string(model_args), batch_size=batch_size)


class Runner:
    """Sends docs to the model as lmms-eval would (same Instance arguments), counting requests."""

    def __init__(self, model, docs: list[dict[str, Any]]):
        self.model, self.docs, self.requests = model, docs, 0
        model.task_dict = {TASK: {SPLIT: docs}}

    def ask(self, doc_ids: list[int]) -> list[str]:
        instances = [
            Instance(
                request_type="generate_until",
                idx=0,
                metadata={"task": TASK, "doc_id": i, "repeats": 1},
                arguments=(cs.doc_to_text(self.docs[i]), cs.doc_to_messages, dict(GEN_KWARGS), i, TASK, SPLIT),
            )
            for i in doc_ids
        ]
        self.requests += len(instances)
        out = self.model.generate_until(instances)
        return [o.text if hasattr(o, "text") else str(o) for o in out]


def chain_summary(chain: dict[str, Any]) -> tuple:
    return tuple((s["segment"], s["kind"], s["correct"]) for s in chain["steps"])


def batched(runner: Runner) -> dict[str, tuple]:
    docs = runner.docs
    texts = runner.ask(list(range(len(docs))))
    filtered = cs.ChainReplayFilter().apply([[t] for t in texts], docs)
    items = [cs.process_results(d, f)["videos"] for d, f in zip(docs, filtered)]
    [m.aggregate(items) for m in TEMPLATE if m.aggregate]  # the metrics, as the aggregation computes them
    return {item["video_id"]: chain_summary(item["chain"]) for item in items if item["chain"]}


def _index(docs: list[dict[str, Any]]) -> dict[tuple[str, str, int], int]:
    return {(d["video_id"], d["kind"], d["segment"]): i for i, d in enumerate(docs)}


def _video_ids(docs: list[dict[str, Any]]) -> dict[str, int]:
    return {d["video_id"]: d["n_segments"] for d in docs}


def _supplementary(runner: Runner, answered: dict[int, str]) -> None:
    """DUA and ICRA: every descriptive question (reusing the chain's answers) and isolated causal question."""
    todo = [i for i, d in enumerate(runner.docs) if d["kind"] in ("desc", cs.ISOLATED) and i not in answered]
    for i in todo:
        answered[i] = runner.ask([i])[0]


def sequential(runner: Runner, supplementary: bool) -> dict[str, tuple]:
    docs, index, answered, chains = runner.docs, _index(runner.docs), {}, {}
    for video_id, n in _video_ids(docs).items():
        restart = next(d["restart"] for d in docs if d["video_id"] == video_id)

        def is_correct(
            kind: str, segment: int, video_id: str = video_id
        ) -> bool:  # asked only when the chain reaches it
            i = index[(video_id, kind, segment)]
            answered[i] = runner.ask([i])[0]
            return cs.score_request(docs[i], answered[i])["correct"]

        replay = replay_chain(n, is_correct, restart)
        chains[video_id] = tuple((s.segment, s.kind, s.correct) for s in replay.steps)
    if supplementary:
        _supplementary(runner, answered)
    return chains


def sequential_rounds(runner: Runner) -> dict[str, tuple]:
    """One call per round holding the next question of every unfinished video (state machine of Algorithm 1)."""
    docs, index = runner.docs, _index(runner.docs)
    state = {v: {"n": n, "segment": 1, "kind": "desc", "steps": []} for v, n in _video_ids(docs).items()}
    restart = docs[0]["restart"]
    while True:
        live = [v for v, s in state.items() if s["segment"] <= s["n"]]
        if not live:
            break
        ids = [index[(v, state[v]["kind"], state[v]["segment"])] for v in live]
        for v, i, text in zip(live, ids, runner.ask(ids)):
            s = state[v]
            correct = cs.score_request(docs[i], text)["correct"]
            s["steps"].append((s["segment"], s["kind"], correct))
            if correct:
                s["kind"] = "causal_after_desc" if s["kind"] == "desc" else "causal_after_causal"
                s["segment"] += 1
            elif restart == "same" and s["kind"] != "desc":
                s["kind"] = "desc"
            else:
                s["kind"], s["segment"] = "desc", s["segment"] + 1
    return {v: tuple(s["steps"]) for v, s in state.items()}


def measure(methods: dict[str, tuple], reps: int) -> dict[str, dict[str, Any]]:
    """Median wall and CPU time per method; methods interleaved within each repetition, so load
    changes on the machine hit all of them alike. One warm-up run each (lazy imports, kernels)."""
    for make, method in methods.values():
        method(make())
    wall: dict[str, list[float]] = {name: [] for name in methods}
    cpu: dict[str, list[float]] = {name: [] for name in methods}
    out: dict[str, dict[str, Any]] = {}
    for _ in range(reps):
        for name, (make, method) in methods.items():
            runner = make()
            start, start_cpu = time.perf_counter(), time.process_time()
            chains = method(runner)
            wall[name].append(time.perf_counter() - start)
            cpu[name].append(time.process_time() - start_cpu)
            out[name] = {"requests": runner.requests, "chains": chains}
    for name in methods:
        out[name].update(seconds=statistics.median(wall[name]), cpu_seconds=statistics.median(cpu[name]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=Path(tempfile.gettempdir()) / "bench_causalstep")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument(
        "--model-args", default=None, help="lmms-eval --model_args for qwen2_5_vl (default: the tiny model)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    os.environ.setdefault("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")  # time decoding, not persistent-cache hits
    from loguru import (
        logger,  # lmms-eval logs a warning per request for frame-list videos ("Failed to probe video")
    )

    logger.remove()
    logger.add(sys.stderr, level="ERROR")

    model_args = args.model_args or lmms_eval_model_args(build_tiny_qwen2_5_vl(args.workdir / "tiny-qwen"))
    docs = list(cs.process_docs([{"benchmark": "causalstep", "source": "sample"}]))
    models = {1: load_model(model_args, 1), 4: load_model(model_args, 4)}

    def runner(batch: int = 1):
        return lambda: Runner(models[batch], docs)

    methods = {
        "batched replay, batch 1": (runner(1), batched),
        "batched replay, batch 4": (runner(4), batched),
        "sequential, chain only": (runner(1), lambda r: sequential(r, supplementary=False)),
        "sequential, chain + DUA + ICRA": (runner(1), lambda r: sequential(r, supplementary=True)),
        "sequential rounds (1 question per video per call), chain only": (runner(4), sequential_rounds),
    }
    rows = []
    measured = measure(methods, args.reps)
    reference = measured["batched replay, batch 1"]["chains"]
    for name, m in measured.items():
        rows.append(
            {
                "run": name,
                "requests": m["requests"],
                "seconds": m["seconds"],
                "cpu_seconds": m["cpu_seconds"],
                "ms_per_request": 1000 * m["seconds"] / m["requests"],
                "same_chains_as_batched": m["chains"] == reference,
            }
        )

    header = (
        "| run | model requests | wall time (s) | CPU time (s) | wall ms / request | same chains as batched |\n"
        "|---|---:|---:|---:|---:|:---:|"
    )
    lines = [
        f"| {r['run']} | {r['requests']} | {r['seconds']:.3f} | {r['cpu_seconds']:.3f} | {r['ms_per_request']:.1f} | "
        f"{'yes' if r['same_chains_as_batched'] else 'NO'} |"
        for r in rows
    ]
    env = {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor(),
        "lmms_eval": version("lmms_eval"),
        "transformers": version("transformers"),
        "reps": args.reps,
        "model_args": model_args,
        "videos": len(_video_ids(docs)),
        "docs": len(docs),
    }
    print(
        f"causalstep_sample: {env['videos']} videos, {env['docs']} requests; median of {args.reps}; "
        f"lmms-eval {env['lmms_eval']}, transformers {env['transformers']}, Python {env['python']} on {env['machine']}\n"
    )
    print("\n".join([header, *lines]))
    if args.json:
        args.json.write_text(
            json.dumps({"env": env, "rows": rows, "chains": {k: list(v) for k, v in reference.items()}}, indent=1)
        )
    return 0 if all(r["same_chains_as_batched"] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
