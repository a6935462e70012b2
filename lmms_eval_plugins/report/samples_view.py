"""The report's samples view (``samples.html``): every logged sample of every run, side by side (issue 39).

``report -o DIR`` writes, beside report.html:

- ``samples_data.js``: one compact object (``window.LMMS_SAMPLES``) of the runs, the tasks and, per
  document, its gold answer, prompt, media thumbnails and, per run, the reply, its outcome (right,
  wrong, unparseable, unscored with its cause, skipped), the scored item's fields and the judge's
  verdict. A separate script file, not JSON fetched by the page: a page opened from disk may not fetch.
- ``samples.html``: the page (no CDN, no absolute path, nothing asked outside the folder). It builds
  every element with ``textContent``, never ``innerHTML``: a hostile reply is shown as text.
- ``samples_media/``: thumbnails (160 px JPEG) of each sample's images and of 4 frames of each of its
  videos, decoded by the plugin's media readers (their pixel caps apply), each file once. A file that
  cannot be read is named in the sample instead.

Each samples file is read once, streamed; texts are cut to :data:`MAX_TEXT` characters.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.logged_samples import BULKY, first_item, iter_samples, logged_reply
from lmms_eval_plugins.outcome import MEDIA_SKIP_FIELD, UNSCORED_FIELD, UNSCORED_METRIC
from lmms_eval_plugins.runs import Run
from lmms_eval_plugins.safe_files import atomic_writer, write_atomic
from lmms_eval_plugins.safe_text import escape_controls

MAX_TEXT = 6000  # characters of a prompt or reply kept
MAX_FIELD = 300  # characters of one item field kept
THUMB = 160  # longest side of a thumbnail, pixels
FRAMES = 4  # frames shown per video
MAX_MEDIA = 4  # images or videos shown per sample
IMAGE_SUFFIXES = {".png", ".jpg", ".jpeg", ".webp", ".gif", ".bmp"}
VIDEO_SUFFIXES = {".mp4", ".avi", ".mkv", ".mov", ".webm"}
HIDDEN_FIELDS = {"judge"}  # shown in the judge block


def _cut(text: Any, limit: int = MAX_TEXT) -> str:
    text = escape_controls(str(text))
    return text if len(text) <= limit else text[:limit] + f" … ({len(text) - limit} more characters)"


def reply_of(record: Mapping[str, Any]) -> tuple[str, Any]:
    """(the model's reply, the judge outcome attached to it by a judge filter, if any)."""
    text, attachment = logged_reply(record)
    return text or "", (attachment or {}).get("judge")


def outcome_of(record: Mapping[str, Any], item: Mapping[str, Any] | None) -> tuple[str, str]:
    """(right | wrong | unparseable | unscored | skipped | scored, why) of one logged sample."""
    unscored = record.get(UNSCORED_METRIC)
    if isinstance(unscored, Mapping) and unscored.get(UNSCORED_FIELD):
        return "unscored", str(unscored[UNSCORED_FIELD])
    if not isinstance(item, Mapping):
        return "scored", ""
    if item.get(MEDIA_SKIP_FIELD):
        return "skipped", str(item.get(MEDIA_SKIP_FIELD))
    if item.get("parse_error") or ("pred" in item and item.get("pred") is None):
        return "unparseable", str(item.get("parse_error") or "nothing read")
    for key in ("correct", "score"):
        value = item.get(key)
        if isinstance(value, bool) or value in (0, 1, 0.0, 1.0):
            return ("right" if bool(value) else "wrong"), ""
    return "scored", ""


def _judge_view(judge: Any) -> dict[str, Any] | None:
    if not isinstance(judge, Mapping):
        return None
    detail = judge.get("detail")
    return {
        "name": _cut(judge.get("name") or "", 100),
        "model": _cut(judge.get("model") or "", 100),
        "verdict": judge.get("verdict") if isinstance(judge.get("verdict"), (int, float)) else None,
        "error": _cut(judge["error"], MAX_FIELD) if judge.get("error") else "",
        "cached": bool(judge.get("cached")),
        "skipped": bool(judge.get("skipped")),
        "detail": _cut(json.dumps(detail, ensure_ascii=False, default=str), 2000) if detail else "",
    }


def _fields(item: Mapping[str, Any] | None) -> list[list[str]]:
    if not isinstance(item, Mapping):
        return []
    return [
        [_cut(k, 80), _cut(json.dumps(v, ensure_ascii=False, default=str), MAX_FIELD)]
        for k, v in item.items()
        if k not in HIDDEN_FIELDS
    ]


RUN_COUNT_KEYS = {UNSCORED_METRIC, "skipped", "skipped_by_reason"}  # the run's counts, not the sample's view
MAX_OTHER = 2000  # characters of a metric's own item kept (a replayed causal chain, with its steps)


def _other_items(record: Mapping[str, Any], item: Any) -> list[list[str]]:
    """The fields of every item a metric logged apart from the line's first (what a benchmark's metric adds
    for its own aggregation: CausalStep's replayed chain, for one), as ``metric.field``."""
    out: list[list[str]] = []
    for name, value in record.items():
        if name in BULKY or name in RUN_COUNT_KEYS or value is item or not isinstance(value, Mapping) or value == item:
            continue
        for key, field in value.items():
            if isinstance(item, Mapping) and item.get(key) == field:
                continue  # shown above
            out.append([_cut(f"{name}.{key}", 80), _cut(json.dumps(field, ensure_ascii=False, default=str), MAX_OTHER)])
    return out


class Thumbnails:
    """Each media file's thumbnails, written once into ``folder`` (named by a hash of the path)."""

    def __init__(self, out_dir: Path, budget: int) -> None:
        self.out_dir, self.folder, self.budget = out_dir, out_dir / "samples_media", budget
        self.done: dict[str, list[dict[str, str]]] = {}

    def _save(self, image: Any, name: str) -> str:
        self.folder.mkdir(exist_ok=True)
        buffer = io.BytesIO()
        image.convert("RGB").save(buffer, "JPEG", quality=70)
        write_atomic(self.folder / name, buffer.getvalue())
        self.budget -= 1
        return f"samples_media/{name}"

    def of(self, path: str) -> list[dict[str, str]]:
        if path in self.done:
            return self.done[path]
        from lmms_eval_plugins import media

        name = hashlib.sha256(path.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        suffix = Path(path).suffix.lower()
        shown = escape_controls(Path(path).name)
        try:
            if path.startswith(("http://", "https://")):
                out = []  # never fetched: the page asks nothing outside its folder
            elif self.budget <= 0:
                out = [{"error": f"{shown}: not shown (thumbnail limit reached)"}]
            elif suffix in IMAGE_SUFFIXES:
                out = [{"src": self._save(media.load_image(path, max_long_side=THUMB), f"{name}.jpg"), "label": shown}]
            elif suffix in VIDEO_SUFFIXES:
                frames = media.sample_video(path, FRAMES, max_long_side=THUMB)
                out = [
                    {"src": self._save(frame, f"{name}_{k}.jpg"), "label": f"{shown} {t:.1f} s"}
                    for k, (frame, t) in enumerate(zip(frames.frames, frames.timestamps))
                ]
            else:
                out = [{"error": f"{shown}: not an image or a video"}]
        except (DataError, OSError, ValueError, RuntimeError) as exc:  # MediaError is a DataError
            out = [{"error": f"{shown}: cannot be read ({_cut(getattr(exc, 'problem', exc), 200)})"}]
        self.done[path] = out
        return out

    def of_visuals(self, key: str, visuals: Sequence[Any]) -> list[dict[str, str]]:
        """Thumbnails of what the task's ``doc_to_visual`` gave the model (images, sampled frames, paths)."""
        picked = list(visuals)
        if len(picked) > MAX_VISUALS:  # evenly spaced, first and last included
            step = (len(picked) - 1) / (MAX_VISUALS - 1)
            picked = [picked[round(k * step)] for k in range(MAX_VISUALS)]
        name = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]
        out: list[dict[str, str]] = []
        for k, visual in enumerate(picked):
            if isinstance(visual, str):
                out += self.of(visual)
            elif hasattr(visual, "convert") and self.budget > 0:
                image = visual.copy()
                image.thumbnail((THUMB, THUMB))
                out.append({"src": self._save(image, f"{name}_v{k}.jpg"), "label": f"frame {k + 1} of {len(picked)}"})
        return out


MAX_VISUALS = 8  # thumbnails of one document's visuals (frames evenly spaced)


def _media(record: Mapping[str, Any], thumbs: Thumbnails | None) -> list[dict[str, str]]:
    paths = record.get("input_media")
    if thumbs is None or not isinstance(paths, list):
        return []
    out: list[dict[str, str]] = []
    for path in [p for p in paths if isinstance(p, str)][:MAX_MEDIA]:
        out += thumbs.of(path)
    return out


def task_visuals(task: str) -> Callable[[Any], list[Any]] | None:
    """doc_id -> what the task's ``doc_to_visual`` hook gives the model for that document, from the task's
    YAML (``process_docs`` over its data source, as lmms-eval builds the docs); None when the task is no
    installed benchmark's or its data is not local (the bundled sample, or ``LMMS_EVAL_PLUGINS_DATA_ROOT``:
    the report never downloads)."""
    import os

    from lmms_eval_plugins.benchmark import benchmark_of_task
    from lmms_eval_plugins.data import DATA_ROOT_ENV
    from lmms_eval_plugins.yaml_index import read_task_yamls

    spec = benchmark_of_task(task)
    if spec is None:
        return None
    entries = read_task_yamls([spec.tasks_dir], recursive=False)
    by_file = {e.path.name: e for e in entries}
    entry = next((e for e in entries if e.kind == "task" and e.name == task), None)
    config: dict[str, Any] = {}
    seen: set[str] = set()
    while entry is not None and entry.path.name not in seen:
        seen.add(entry.path.name)
        config = {**entry.config, **config}
        entry = by_file.get(entry.include)
    process, visual = str(config.get("process_docs", "")), str(config.get("doc_to_visual", ""))
    source = ((config.get("dataset_kwargs") or {}).get("data_files") or {}).get("test")
    if not process.startswith("!function utils.") or not visual.startswith("!function utils.") or not source:
        return None
    rows = json.loads((spec.tasks_dir / str(source)).read_text(encoding="utf-8"))
    rows = rows if isinstance(rows, list) else [rows]
    if any(r.get("source") != "sample" for r in rows) and not os.environ.get(DATA_ROOT_ENV):
        return None
    hooks = spec.hooks()
    docs = list(getattr(hooks, process.rpartition(".")[2])(rows))
    to_visual = getattr(hooks, visual.rpartition(".")[2])

    def visuals(doc_id: Any) -> list[Any]:
        return list(to_visual(docs[int(doc_id)])) if str(doc_id).isdigit() and int(doc_id) < len(docs) else []

    return visuals


def _visuals(
    task: str, doc_id: Any, cache: dict[str, Any], thumbs: Thumbnails, notes: list[str]
) -> list[dict[str, str]]:
    if task not in cache:
        try:
            cache[task] = task_visuals(task)
        except Exception as exc:  # the view shows what it can: the task's docs are a courtesy
            cache[task] = None
            notes.append(f"samples view: no media for {task}: {type(exc).__name__}: {_cut(exc, 200)}")
    if cache[task] is None:
        return []
    try:
        return thumbs.of_visuals(f"{task}:{doc_id}", cache[task](doc_id))
    except Exception as exc:  # one document's media: named in its place
        return [
            {"error": f"media of doc {_cut(doc_id, 40)}: cannot be read ({_cut(getattr(exc, 'problem', exc), 200)})"}
        ]


def collect(runs: Sequence[Run], thumbs: Thumbnails | None) -> dict[str, Any]:
    """The view's data: runs, tasks, and every document of every task any run logged."""
    tasks = sorted({t for run in runs for t in run.tasks})
    docs: dict[tuple[int, Any], dict[str, Any]] = {}
    visuals_of: dict[str, Callable[[Any], list[Any]] | None] = {}
    for r, run in enumerate(runs):
        for t, task in enumerate(tasks):
            result = run.tasks.get(task)
            if result is None or not result.samples_path.is_file():
                continue
            try:
                for record in iter_samples(result.samples_path):
                    key = (t, record.get("doc_id"))
                    doc = docs.get(key)
                    if doc is None:
                        doc = docs[key] = {
                            "t": t,
                            "id": _cut(record.get("doc_id"), 80),
                            "gold": _cut(record.get("target", ""), 2000),
                            "prompt": _cut(record.get("input", "")),
                            "media": _media(record, thumbs),
                            "runs": [None] * len(runs),
                        }
                        # lmms-eval logged the prompt but no media (a video task): ask the task what the model saw. This
                        # loads the task's code and decoders, so a line without its prompt (a trimmed stored run) does not
                        if thumbs is not None and not doc["media"] and "input" in record:
                            doc["media"] = _visuals(task, record.get("doc_id"), visuals_of, thumbs, run.notes)
                    item = first_item(record)
                    reply, attached = reply_of(record)
                    outcome, why = outcome_of(record, item)
                    judge = item.get("judge") if isinstance(item, Mapping) and "judge" in item else attached
                    # kept as its JSON text: one string a run and document, not a tree of small objects
                    doc["runs"][r] = _json(
                        {
                            "reply": _cut(reply),
                            "outcome": outcome,
                            "why": _cut(why, MAX_FIELD),
                            "fields": _fields(item) + _other_items(record, item),
                            "judge": _judge_view(judge),
                        }
                    )
            except DataError as exc:  # a broken samples file: its run's samples are missing from the view
                run.notes.append(f"samples view: {result.samples_path}: {exc.problem}")
    return {"runs": [escape_controls(run.label) for run in runs], "tasks": tasks, "docs": list(docs.values())}


def _json(value: Any) -> str:
    """ASCII-only JSON with every "<" escaped: the data can never close a script element or start a comment."""
    return json.dumps(value, ensure_ascii=True, separators=(",", ":")).replace("<", "\\u003c")


def write_samples_view(runs: Sequence[Run], out_dir: Path, *, media: bool = True, max_thumbnails: int = 20000) -> Path:
    """Write samples.html, samples_data.js and samples_media/ into ``out_dir``; returns the page's path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = collect(runs, Thumbnails(out_dir, max_thumbnails) if media else None)
    with atomic_writer(out_dir / "samples_data.js") as out:  # written a document at a time
        out.write(f'window.LMMS_SAMPLES = {{"runs":{_json(data["runs"])},"tasks":{_json(data["tasks"])},"docs":[')
        for k, doc in enumerate(data["docs"]):
            runs_text = ",".join(r if r is not None else "null" for r in doc.pop("runs"))
            out.write(("," if k else "") + _json(doc)[:-1] + f',"runs":[{runs_text}]}}')
        out.write("]};\n")
    page = out_dir / "samples.html"
    write_atomic(page, (Path(__file__).with_name("samples_page.html")).read_text(encoding="utf-8"))
    return page
