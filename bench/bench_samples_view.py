"""Benchmark: the report's samples view at scale (issue 39).

    .venv/bin/python bench/bench_samples_view.py [--sizes 1000,6000,10000,50000] [--json OUT]

At each size, a stored random run of ErrorRadar STEP and CATE (size/2 documents each, so ``size``
samples: the prompt as lmms-eval logs it, the image path, a reply and the scored item) is written, then:

- ``lmms-eval-plugins report RUN -o DIR --no-plots`` as a child process: wall and CPU seconds, peak RSS,
  and the folder's size (thumbnails included);
- the page in headless Chromium (Debian's ``chromium``, Playwright): time to the first rendered sample,
  and to the result of a search for the last document's id (typed into the search box).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import environment

from lmms_eval_plugins import tasks_dir

IMAGES = sorted((tasks_dir() / "errorradar" / "sample_data" / "images").glob("*.png"))
CATEGORIES = ("VIS", "CAL", "REAS", "KNOW", "MIS")


def write_run(folder: Path, n: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    folder.mkdir(parents=True)
    stamp = "20261129_000000"
    tasks = ("errorradar_step_sample", "errorradar_cate_sample")
    results = {
        "results": {t: {"alias": t, "accuracy,none": 20.0} for t in tasks},
        "config": {"model": "random", "model_args": "seed=7"},
        "date": stamp,
        "n-samples": {t: {"original": n // 2, "effective": n // 2} for t in tasks},
        "versions": {t: 1 for t in tasks},
    }
    (folder / f"{stamp}_results.json").write_text(json.dumps(results), encoding="utf-8")
    for task in tasks:
        with (folder / f"{stamp}_samples_{task}.jsonl").open("w", encoding="utf-8") as out:
            for doc_id in range(n // 2):
                gold = rng.choice(CATEGORIES)
                pred = rng.choice((*CATEGORIES, None))
                item = {
                    "question_id": f"q{doc_id:06d}",
                    "question_type": "t",
                    "round": 0,
                    "gold": gold,
                    "pred": pred,
                    "correct": pred == gold,
                    "parse_error": None if pred else "no category found",
                }
                prompt = (
                    f"Task Definition: identify the error of question q{doc_id:06d}. " + "The solution reads ... " * 60
                )
                line = {
                    "doc_id": doc_id,
                    "target": gold,
                    "filtered_resps": f"Error Category: {pred}",
                    "input_media": [str(IMAGES[doc_id % len(IMAGES)])],
                    "accuracy": item,
                    "unscored": {"unscored": None},
                    "input": prompt,
                }
                out.write(json.dumps(line) + "\n")


def child(command: list[str]) -> tuple[float, float, int]:
    probe = (
        "import resource, subprocess, sys, time; t = time.time(); subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, "
        "check=True); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(time.time() - t, u.ru_utime + u.ru_stime, u.ru_maxrss // 1024)"
    )
    done = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True, check=True)
    wall, cpu, peak = done.stdout.split()
    return float(wall), float(cpu), int(peak)


def browser_figures(folder: Path, last_id: str) -> dict:
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(bypass_csp=True)
        started = time.time()
        page.goto((folder / "samples.html").as_uri())
        page.wait_for_selector(".sample")
        first = time.time() - started
        started = time.time()
        page.fill("#search", last_id)
        page.wait_for_function(
            "id => Array.from(document.querySelectorAll('.sample h2')).some(h => h.textContent.endsWith('doc ' + id))",
            arg=last_id,
        )
        search = time.time() - started
        browser.close()
    return {"first_render_s": round(first, 2), "search_last_doc_s": round(search, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,6000,10000,50000")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    out: dict = {"sizes": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(s) for s in args.sizes.split(",")):
            run, report = Path(tmp) / f"run{n}", Path(tmp) / f"report{n}"
            write_run(run, n)
            wall, cpu, peak = child(
                [
                    sys.executable,
                    "-m",
                    "lmms_eval_plugins.cli",
                    "report",
                    str(run),
                    "-o",
                    str(report),
                    "--no-plots",
                    "--no-markdown",
                ]
            )
            size = sum(p.stat().st_size for p in report.rglob("*") if p.is_file())
            row = {
                "samples": n,
                "report_wall_s": round(wall, 1),
                "report_cpu_s": round(cpu, 1),
                "report_peak_mb": peak,
                "folder_mb": round(size / 1e6, 1),
                **browser_figures(report, str(n // 2 - 1)),
            }
            out["sizes"][str(n)] = row
            print(json.dumps(row), flush=True)
    out["environment"] = {**environment(["lmms-eval"]), "cpus": os.cpu_count()}
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
