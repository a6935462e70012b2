"""Batch API vs synchronous judging, and how much of each judge's prompt a provider's prefix cache could share.

1. Shared prefix per judge: the characters (and tokens: the judge model's tokenizer when it loads offline,
   else characters/4) that every request of a judge starts with, measured over varied items.
2. N pending ViRectify verdicts (semantic_match items shaped like ViRectify's: question, boxed answer,
   reference) against the loopback batch server (tests/batch_server.py):
   * batch: what ``score --batch`` does after its collecting replay: read the collected requests, write
     and upload the batch file(s), create, poll and ingest into a fresh judge cache;
   * sync: the judge runtime at its default concurrency, each call answered after ``--latency`` seconds.
   Each mode runs in a child process (its peak RSS is its own); the server runs in this one.
   The batch wall time is the client's work only: a provider takes up to its completion window (24 h).

    python bench/bench_batch.py --json bench/batch_bench.json      # about 2 minutes on 2 cores
    python bench/bench_batch.py --n 500 --latency 0.05             # quick look
    python bench/bench_batch.py --ingest-sizes 1000,10000,100000 --json bench/batch_ingest_bench.json

3. ``--ingest-sizes``: the batch mode alone at each size, timing its ingest (``BatchClient._ingest``: read the
   output file's lines, check each against the batch's ids, store the verdicts) in CPU seconds against its
   floor in the same process: ``json.loads`` of the same output lines plus one ``executemany`` of as many
   rows into a fresh SQLite table, in one transaction.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # batch_server.py, judge_server.py

from _timing import environment
from batch_server import BatchServer
from lmms_eval_plugins.judges import JudgeItem, load_judge
from lmms_eval_plugins.judges.batch_requests import (
    BatchRequest,
    collect,
    item_fields,
    read_collected,
)
from lmms_eval_plugins.judges.cache import verdict_key

MODEL = "gpt-4o"
QUESTIONS = (
    "What does the person do after opening the fridge?",
    "How many balls are on the table at the end?",
    "Which tool is used to tighten the bolt?",
    "Why does the water level rise in the second beaker?",
)


def items(n: int) -> list[JudgeItem]:
    """ViRectify-shaped items: a question, the boxed answer of a reply, the reference (3 of 4 right)."""
    return [
        JudgeItem(
            question=f"{QUESTIONS[i % 4]} (clip {i})",
            prediction=f"answer {i % 97}" if i % 4 else "something else",
            reference=f"answer {i % 97}",
            item_id=f"virectify-{i}",
        )
        for i in range(n)
    ]


def rubric_items(n: int) -> list[JudgeItem]:
    return [
        JudgeItem(
            question=f"Compare the two cooking videos ({i}).",
            prediction=f"Both fry onions; video {i} adds salt.",
            reference="Both fry onions first.",
            scoring_points=("onions are fried first", f"salt in video {i}"),
        )
        for i in range(n)
    ]


def tokenizer():
    """(name, count function): the judge model's tiktoken encoding if it loads offline, else characters/4."""
    try:
        import tiktoken

        encoding = tiktoken.encoding_for_model(MODEL)
        return f"tiktoken {encoding.name}", lambda text: len(encoding.encode(text))
    except Exception:
        return "characters/4", lambda text: (len(text) + 3) // 4


def shared_prefixes(n: int = 50) -> dict:
    """Per judge: the prompt text every request starts with (messages in order, as sent)."""
    name, count = tokenizer()
    out = {"tokens_by": name}
    for judge_name, made in (("semantic_match", items(n)), ("rubric", rubric_items(n))):
        judge = load_judge(judge_name)
        texts = ["\n".join(m["content"] for m in judge.build_messages(item)) for item in made]
        prefix = os.path.commonprefix(texts)
        mean = sum(map(len, texts)) / len(texts)
        out[judge_name] = {
            "shared_prefix_chars": len(prefix),
            "shared_prefix_tokens": count(prefix),
            "mean_prompt_chars": round(mean),
            "shared_fraction": round(len(prefix) / mean, 3),
            "nonce_after_prefix": all(t.rfind("score-") == -1 or t.rfind("score-") >= len(prefix) for t in texts),
        }
    return out


def requests(n: int, base_url: str) -> list[BatchRequest]:
    judge = load_judge("semantic_match")
    out = []
    for item in items(n):
        messages = judge.build_messages(item)
        key = verdict_key(
            judge=judge.name,
            version=judge.version,
            model=MODEL,
            endpoint=base_url,
            messages=messages,
            sampling=judge.sampling,
        )
        out.append(
            BatchRequest(
                key, judge.name, judge.version, MODEL, base_url, dict(judge.sampling), messages, item_fields(item)
            )
        )
    return out


class _IngestTimer:
    """Wraps a client's ingest: its CPU seconds, and the raw output lines it read (for the floor)."""

    def __init__(self, client) -> None:
        self.cpu, self.lines = 0.0, []
        ingest, lines = client._ingest, client._lines

        def timed_ingest(*args, **kwargs):
            started = time.process_time()
            try:
                return ingest(*args, **kwargs)
            finally:
                self.cpu += time.process_time() - started

        def kept_lines(*args, **kwargs):
            for number, raw in lines(*args, **kwargs):
                if raw:
                    self.lines.append(raw)
                yield number, raw

        client._ingest, client._lines = timed_ingest, kept_lines

    def figures(self, folder: Path) -> dict:
        import sqlite3

        lines = self.lines
        started = time.process_time()
        parsed = [json.loads(raw) for raw in lines]
        rows = [(p["custom_id"], json.dumps(p["response"]["body"]["choices"][0]["message"]["content"])) for p in parsed]
        db = sqlite3.connect(folder / "floor.sqlite3")
        db.execute("CREATE TABLE verdicts (key TEXT PRIMARY KEY, reply TEXT)")
        with db:
            db.executemany("INSERT INTO verdicts VALUES (?, ?)", rows)
        db.close()
        floor = time.process_time() - started
        return {
            "ingest_cpu_s": round(self.cpu, 3),
            "floor_cpu_s": round(floor, 3),
            "ratio_to_floor": round(self.cpu / floor, 2),
            "output_lines": len(lines),
        }


def _timed_ingest(client) -> _IngestTimer:
    return _IngestTimer(client)


def child(mode: str, n: int, base_url: str) -> dict:
    from lmms_eval_plugins.judges.batch import BatchClient, BatchRun, BatchSettings
    from lmms_eval_plugins.judges.cache import VerdictCache
    from lmms_eval_plugins.judges.endpoint import Endpoint
    from lmms_eval_plugins.judges.runtime import JudgeRuntime, RuntimeSettings

    endpoint = Endpoint(base_url, "bench-key")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        if mode in ("batch", "ingest"):
            collected = Path(tmp) / "collected.jsonl"
            collect(collected, requests(n, base_url))  # what the collecting replay leaves
            pending = read_collected(collected)
            cache = VerdictCache(Path(tmp) / "cache.sqlite3")
            client = BatchClient(endpoint, cache, Path(tmp), BatchSettings(poll_s=0.05), log=lambda _: None)
            run = BatchRun()
            state = client.submit(pending, run)
            timed = _timed_ingest(client) if mode == "ingest" else None
            client.collect(pending, state, run, None)
            result = {
                "verdicts": run.verdicts,
                "batches": len(state["batches"]),
                "batch_file_bytes": sum(e["bytes"] for e in state["batches"]),
                "collected_file_bytes": collected.stat().st_size,
            }
            if timed is not None:
                result.update(timed.figures(Path(tmp)))
        else:
            runtime = JudgeRuntime(Path(tmp) / "cache.sqlite3")
            settings = RuntimeSettings.from_env({})
            outcomes = runtime.judge_items(
                load_judge("semantic_match"), items(n), model=MODEL, endpoint=endpoint, settings=settings
            )
            result = {"verdicts": sum(1 for o in outcomes if o.ok), "concurrency": settings.concurrency}
        result["wall_s"] = round(time.perf_counter() - started, 2)
    result["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds per synchronous call at the server")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--ingest-sizes", default=None, help="comma-separated sizes: time the batch ingest alone")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "URL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], args.n, args.child[1])))
        return
    if args.ingest_sizes:
        ingest_figures(args)
        return
    figures: dict = {"n": args.n, "sync_latency_s": args.latency, "prefix": shared_prefixes()}
    with BatchServer(latency=args.latency, lifetime=3600) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LMMS_EVAL_PLUGINS_JUDGE")}
        env["LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET"] = str(Path(tempfile.mkdtemp()) / "secret")
        for mode in ("batch", "sync"):
            before = server.sync_calls
            done = subprocess.run(
                [sys.executable, __file__, "--n", str(args.n), "--child", mode, server.base_url],
                env=env,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            )
            figures[mode] = {
                **json.loads(done.stdout.strip().splitlines()[-1]),
                "sync_calls": server.sync_calls - before,
            }
    figures["environment"] = environment(["openai"])
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


def ingest_figures(args) -> None:
    sizes = [int(s) for s in args.ingest_sizes.split(",")]
    figures: dict = {"sizes": {}}
    with BatchServer(latency=0.0, lifetime=3600) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LMMS_EVAL_PLUGINS_JUDGE")}
        env["LMMS_EVAL_PLUGINS_JUDGE_CACHE_SECRET"] = str(Path(tempfile.mkdtemp()) / "secret")
        for n in sizes:
            done = subprocess.run(
                [sys.executable, __file__, "--n", str(n), "--child", "ingest", server.base_url],
                env=env,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            )
            figures["sizes"][n] = {
                **json.loads(done.stdout.strip().splitlines()[-1]),
                "load_avg_1m": os.getloadavg()[0],
            }
            print(n, json.dumps(figures["sizes"][n]), flush=True)
    per = {n: f["ingest_cpu_s"] / n for n, f in figures["sizes"].items()}
    if len(sizes) > 1:
        figures["cost_per_verdict_growth_last_step"] = round(per[sizes[-1]] / per[sizes[-2]], 2)
    figures["environment"] = environment(["openai"])
    text = json.dumps(figures, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
