"""Regenerate the report test fixtures: real ``lmms-eval`` output of the oracle and random models.

``PYTHONPATH=tests python -m testkit.report_fixtures [--dest tests/data/report_runs]`` runs
``--model oracle`` and ``--model random --model_args seed=0`` (with ``--log_samples``) on every
``*_sample`` group this package defines (and on every ``*_sample`` task of a benchmark that has no
such group), then copies trimmed copies of what lmms-eval wrote into ``DEST/oracle/`` and
``DEST/random/``:

- the results JSON without its ``configs`` and ``task_hashes`` blocks (function reprs, prompts and
  hashes: large and unused);
- each samples JSONL without the prompt text (``input``), media paths and doc hashes, with each
  sample's per-record item kept once (lmms-eval logs the same item under every metric name) and
  long responses and targets cut to 300 characters;
- the judges' accounting JSON (``judge_report*.json``; the judged tasks run with the offline judges).

File names stay as lmms-eval wrote them (``<date>_results.json``, ``<date>_samples_<task>.jsonl``).
Everything runs offline on the bundled sample data, on the CPU, in about a minute.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from lmms_eval_plugins.cli_run import run_lmms_eval
from lmms_eval_plugins.logged_samples import read_samples
from lmms_eval_plugins.runs import latest_results, samples_files
from lmms_eval_plugins.tasks_command import sample_tasks

MODELS: dict[str, tuple[str, str | None]] = {"oracle": ("oracle", None), "random": ("random", "seed=0")}
MAX_TEXT = 300
DEFAULT_DEST = Path(__file__).resolve().parents[1] / "data" / "report_runs"


def _cut(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= MAX_TEXT else value[:MAX_TEXT] + "…"
    if isinstance(value, list):
        return [_cut(v) for v in value]
    if isinstance(value, dict):
        return {k: (_cut(v) if k in ("text", "reply") or not isinstance(v, str) else v) for k, v in value.items()}
    return value


_DROP = ("input", "input_media", "doc_hash", "token_counts", "arguments", "resps")


def trim_sample(sample: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    kept_values: list[Any] = []
    for key, value in sample.items():
        if key in _DROP:
            continue
        if key == "doc_id":
            out[key] = value
        elif key in ("target", "filtered_resps"):
            out[key] = _cut(value)
        else:  # a metric's per-record item: keep each distinct one once
            if any(value == v for v in kept_values):
                continue
            kept_values.append(value)
            out[key] = value
    return out


def trim_results(results: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in results.items() if k not in ("configs", "task_hashes")}


def copy_trimmed(run_dir: Path, dest: Path) -> list[Path]:
    """Copy the newest results JSON of ``run_dir``, its samples and any judge report into ``dest``."""
    results_path = latest_results(run_dir)
    if results_path is None:
        raise RuntimeError(f"lmms-eval wrote no *_results.json under {run_dir}")
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    written = []
    data = json.loads(results_path.read_text(encoding="utf-8"))
    target = dest / results_path.name
    target.write_text(json.dumps(trim_results(data), indent=1) + "\n", encoding="utf-8")
    written.append(target)
    for samples in samples_files(results_path):
        lines = read_samples(samples)
        target = dest / samples.name
        target.write_text(
            "".join(json.dumps(trim_sample(s), ensure_ascii=False) + "\n" for s in lines), encoding="utf-8"
        )
        written.append(target)
    for report in sorted(run_dir.rglob("judge_report*.json")):
        target = dest / report.name
        shutil.copyfile(report, target)
        written.append(target)
    return written


# ----------------------------------------------------------------------------------------------- reading a report


class _TableRows(HTMLParser):
    """The rows of one ``<table id=...>`` of report.html: a dict per row, column (``data-col``) -> cell text."""

    def __init__(self, table_id: str) -> None:
        super().__init__()
        self.table_id, self.rows = table_id, []
        self._inside = False
        self._col: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._inside = a.get("id") == self.table_id
        elif self._inside and tag == "tr" and "data-row" in a:
            self.rows.append({})
        elif self._inside and tag == "td" and a.get("data-col") and self.rows:
            self._col, self._text = a["data-col"], []

    def handle_endtag(self, tag: str) -> None:
        if tag == "td" and self._col is not None:
            self.rows[-1][self._col] = "".join(self._text).strip()
            self._col = None
        elif tag == "table":
            self._inside = False

    def handle_data(self, data: str) -> None:
        if self._col is not None:
            self._text.append(data)


def html_table_rows(html_text: str, table_id: str) -> list[dict[str, str]]:
    """Every row of the report table ``table_id``, in order (the row label under ``"model"``)."""
    parser = _TableRows(table_id)
    parser.feed(html_text)
    return parser.rows


# ----------------------------------------------------------------------------------------------- browser check

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--mute-audio",
)
# Collects what the page shows: every image's load state, every in-page link target, each section's box.
_PAGE_PROBE = """(() => {
  const imgs = [...document.images].map(i => ({alt: i.alt, complete: i.complete, w: i.naturalWidth, h: i.naturalHeight,
                                               inline: i.src.startsWith('data:image/png;base64,')}));
  const refs = [...document.querySelectorAll('[src],[href]')].map(e => e.getAttribute('src') || e.getAttribute('href'));
  const anchors = refs.filter(r => r.startsWith('#')).map(r => ({ref: r, ok: !!document.getElementById(r.slice(1))}));
  const external = refs.filter(r => !r.startsWith('#') && !r.startsWith('data:'));
  // Tables wider than the window, or scrolled inside their wrapper, with every <details> open.
  document.querySelectorAll('details').forEach(d => d.open = true);
  const page = document.documentElement.scrollWidth;
  const tables = [...document.querySelectorAll('table')];
  const overflow = tables.map(t => {
    const r = t.getBoundingClientRect(), p = t.parentElement;
    return {id: t.id, right: Math.round(r.right), hidden: p && p.scrollWidth > p.clientWidth + 1 ? p.scrollWidth - p.clientWidth : 0};
  }).filter(t => t.right > window.innerWidth + 1 || t.hidden);
  document.querySelectorAll('details').forEach(d => d.open = false);
  const sections = [...document.querySelectorAll('section')].map(s => {
    const r = s.getBoundingClientRect();
    return {id: s.id, x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height};
  });
  return JSON.stringify({imgs, anchors, external, sections, scripts: document.scripts.length,
                         width: document.documentElement.scrollWidth, title: document.title,
                         page_width_open: page, window_width: window.innerWidth, tables: tables.length, overflow});
})()"""


def find_chromium() -> str | None:
    for candidate in ("/usr/lib/chromium/chromium", "chromium", "chromium-browser", "google-chrome"):
        path = (
            shutil.which(candidate)
            if not candidate.startswith("/")
            else (candidate if Path(candidate).exists() else None)
        )
        if path:
            return path
    return None


class _DevTools:
    """The Chrome DevTools protocol over ``--remote-debugging-pipe`` (fd 3 in, fd 4 out, NUL-framed JSON)."""

    def __init__(self, binary: str, user_data_dir: Path, timeout: float = 60.0) -> None:
        import os
        import subprocess

        self.timeout = timeout
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def wire() -> None:  # in the child: the pipe ends become fds 3 and 4 (inheritable)
            import fcntl

            # copies numbered 10 and up first, so that dup2 never gets fd == target (which would keep CLOEXEC)
            src_in, src_out = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
            os.dup2(src_in, 3)
            os.dup2(src_out, 4)

        self.proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={user_data_dir}", "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            preexec_fn=wire,
            close_fds=False,
        )
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        import os
        import select
        import time

        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from chromium over the DevTools pipe")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if ready:
                chunk = os.read(self._from_chrome, 1 << 20)
                if not chunk:
                    raise RuntimeError(
                        "chromium closed the DevTools pipe: "
                        + (
                            self.proc.stderr.read().decode(errors="replace")[-2000:]
                            if self.proc.poll() is not None
                            else ""
                        )
                    )
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        import os
        import time

        self._next_id += 1
        message: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, event: str, session: str) -> None:
        import time

        if any(e.get("method") == event and e.get("sessionId") == session for e in self.events):
            return
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._read_message(deadline)
            self.events.append(message)
            if message.get("method") == event and message.get("sessionId") == session:
                return

    def close(self) -> None:
        import os

        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass


def check_report_in_browser(
    html_path: Path,
    shots_dir: Path | None = None,
    *,
    width: int = 1280,
    binary: str | None = None,
    top_height: int | None = None,
) -> dict[str, Any]:
    """Open ``html_path`` in headless Chromium and return what it found: ``images`` (load state of
    every ``<img>``), ``anchors`` (every in-page link and whether its target exists), ``external``
    (references to anything but ``#id`` and ``data:``), ``errors`` (script exceptions and console
    errors), ``sections`` and, with ``shots_dir``, ``screenshots`` (one PNG per ``<section>``, plus
    ``page-top`` of ``top_height`` pixels when given)."""
    import base64

    binary = binary or find_chromium()
    if binary is None:
        raise FileNotFoundError("chromium not found")
    with tempfile.TemporaryDirectory(prefix="report_chromium_") as profile:
        tools = _DevTools(binary, Path(profile))
        try:
            target = tools.call("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
            for domain in ("Page", "Runtime", "Log"):
                tools.call(f"{domain}.enable", session=session)
            tools.call(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": False},
                session=session,
            )
            tools.call("Page.navigate", {"url": Path(html_path).resolve().as_uri()}, session=session)
            tools.wait_for("Page.loadEventFired", session)
            probe = tools.call("Runtime.evaluate", {"expression": _PAGE_PROBE, "returnByValue": True}, session=session)
            if "exceptionDetails" in probe:
                raise RuntimeError(f"the page probe failed: {probe['exceptionDetails']}")
            found = json.loads(probe["result"]["value"])
            shots: dict[str, Path] = {}
            if shots_dir is not None:
                shots_dir.mkdir(parents=True, exist_ok=True)
                for section in found["sections"]:
                    if section["h"] <= 0:
                        continue
                    clip = {
                        "x": 0,
                        "y": section["y"],
                        "width": max(width, found["width"]),
                        "height": min(section["h"], 16000),
                        "scale": 1,
                    }
                    shot = tools.call(
                        "Page.captureScreenshot",
                        {"format": "png", "clip": clip, "captureBeyondViewport": True},
                        session=session,
                    )
                    path = shots_dir / f"{section['id'] or 'section'}.png"
                    path.write_bytes(base64.b64decode(shot["data"]))
                    shots[section["id"]] = path
                if top_height:
                    clip = {"x": 0, "y": 0, "width": width, "height": top_height, "scale": 1}
                    shot = tools.call(
                        "Page.captureScreenshot",
                        {"format": "png", "clip": clip, "captureBeyondViewport": True},
                        session=session,
                    )
                    path = shots_dir / "page-top.png"
                    path.write_bytes(base64.b64decode(shot["data"]))
                    shots["page-top"] = path
            errors = [e["params"] for e in tools.events if e.get("method") == "Runtime.exceptionThrown"]
            errors += [
                e["params"]["entry"]
                for e in tools.events
                if e.get("method") == "Log.entryAdded" and e["params"]["entry"].get("level") == "error"
            ]
            errors += [
                e["params"]
                for e in tools.events
                if e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") in ("error", "assert")
            ]
        finally:
            tools.close()
    return {
        "images": found["imgs"],
        "anchors": found["anchors"],
        "external": found["external"],
        "errors": errors,
        "sections": found["sections"],
        "scripts": found["scripts"],
        "title": found["title"],
        "screenshots": shots,
        "width": found["width"],
        "page_width_open": found["page_width_open"],
        "window_width": found["window_width"],
        "tables": found["tables"],
        "overflow": found["overflow"],
    }


def save_screenshot(dest: Path, png: Path, height: int) -> int:
    from lmms_eval_plugins import report

    with tempfile.TemporaryDirectory(prefix="report_shot_") as tmp:
        out = Path(tmp) / "report"
        runs = [str(dest / name) for name in MODELS if (dest / name).is_dir()]
        if report.main([*runs, "-o", str(out), "--no-markdown"]) != 0:
            return 1
        seen = check_report_in_browser(out / "report.html", Path(tmp) / "shots", top_height=height)
        png.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(seen["screenshots"]["page-top"], png)
    print(f"wrote {png}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m testkit.report_fixtures",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--dest", type=Path, default=DEFAULT_DEST, help="where oracle/ and random/ go (default: %(default)s)"
    )
    parser.add_argument("--tasks", help="comma-separated tasks or groups instead of every *_sample one")
    parser.add_argument(
        "--screenshot",
        type=Path,
        metavar="PNG",
        help="do not run lmms-eval: build the report from DEST's runs, open it in headless Chromium "
        "and save the top of the page to PNG (the README's docs/report_screenshot.png)",
    )
    parser.add_argument(
        "--screenshot-height", type=int, default=1405, help="pixels from the top (default: %(default)s)"
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.screenshot:
        return save_screenshot(args.dest, args.screenshot, args.screenshot_height)
    tasks = args.tasks.split(",") if args.tasks else sample_tasks()
    if not tasks:
        print("no *_sample tasks found", file=sys.stderr)
        return 1
    print(f"tasks: {', '.join(tasks)}")
    with tempfile.TemporaryDirectory(prefix="report_fixtures_") as tmp:
        for name, (model, model_args) in MODELS.items():
            out = Path(tmp) / name
            out.mkdir()
            env = {
                "LMMS_EVAL_PLUGINS_JUDGE": "offline",
                "LMMS_EVAL_PLUGINS_JUDGE_REPORT": str(out) + "/",
                "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(Path(tmp) / f"judge_cache_{name}.sqlite3"),
            }
            run = run_lmms_eval(tasks=tasks, model=model, model_args=model_args, output_dir=out, env=env)
            missing = [t for t in tasks if t not in run.results.get("results", {})]
            if run.results_path is None or missing:
                print(
                    f"{name}: lmms-eval did not complete {missing or tasks}; its output ends with:\n{run.tail()}",
                    file=sys.stderr,
                )
                return 1
            for path in copy_trimmed(out, args.dest / name):
                print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
