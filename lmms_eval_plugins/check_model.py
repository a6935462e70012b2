"""``lmms-eval-plugins check-model``: run every ``*_sample`` task with a model and report what breaks.

For a model team before a real run: does the model class complete each benchmark's requests, can the
task's parser read its replies (format compliance), what does a typical unreadable reply look like,
and what shape of request (images, videos, frames, interleaving) does each task send?

How each column is computed:

- **completed**: the task has an entry in lmms-eval's results JSON (lmms-eval exits 0 even when a
  task fails) and none of its model requests failed. All tasks run in one lmms-eval process (the
  model loads once); if some have no results, each of those is run again alone, so one crashing task
  cannot hide the others, and the last exception line of its log is reported. lmms-eval's API
  classes do not raise on a failed request: they reply ``[LMMS_EVAL_REQUEST_FAILED after N retries]
  <error>`` (or ``[LMMS_EVAL_BUDGET_EXCEEDED]``); such a reply in a logged sample
  (:func:`lmms_eval_plugins.outcome.request_failure`) makes the task not completed ("N of M model
  requests failed: <first error>"), and it is left out of the format compliance.
- **format compliance**: from the logged samples (``--log_samples``): the share of requests whose
  reply the task could read. Our tasks log a per-request item with ``parse_error`` (None when the
  reply was read); ViRectify logs ``format_ok`` and the ``missing`` parts of its tagged format; for
  free-form judged answers (CrossVid CCQA) a reply counts when the judge found something to judge in it (not ``judge.skipped``).
  A task that logs none of these falls back to its ``*_parse_fail`` metric over the number of requests.
- **typical failure**: the most common ``parse_error`` (its count) with one raw reply that caused it.
- **request shapes**: computed in this process, not from the model: the task's YAML is loaded with
  lmms-eval's own loader (``lmms_eval.utils.load_yaml_config``), its ``process_docs`` is run on its
  source file and its ``doc_to_messages`` is called on the same docs lmms-eval sends (the first
  ``--limit``). Chat model classes receive exactly these messages; simple classes get
  ``doc_to_visual`` and ``doc_to_text`` of the same docs (same media, the text with ``<image>``
  placeholders). Known pitfalls of lmms-eval's built-in classes are flagged: frames of one video with
  different sizes, an empty frame list, and a later video with fewer frames than the first
  (``qwen2_5_vl`` probes only the first video).
- **sent (observed)**: what the model class actually sent, for API classes only (``--model openai``,
  ``async_openai``, and any class given ``base_url=``): a loopback recording proxy
  (:mod:`lmms_eval_plugins.recording_proxy`) sits in front of the endpoint for the length of the
  check (the ``base_url=`` model arg is rewritten to it; without one, the ``OPENAI_API_BASE`` the
  class falls back to), forwards every request and reply unchanged, and keeps a summary of each
  chat-completions body (never headers, so never the API key). Reported: requests, ``image_url``
  items per request, frames per video (runs of consecutive ``image_url`` items between text parts),
  image sizes as received; each body is matched to its doc by its text parts and compared with what
  the doc intended (frame counts, padding, resizing). Local classes: "not observable" (no guessing).

Output: a Markdown table on stdout, details below it, ``--json OUT`` for machines. Exit code 0 only
if every task completed.

    lmms-eval-plugins check-model --model qwen2_5_vl --model_args pretrained=Qwen/Qwen2.5-VL-7B-Instruct
    lmms-eval-plugins check-model --model my_model --tasks errorradar,crossvid_bu_sample --limit 4 --json report.json
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import read_jsonl
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.safe_text import md_code, md_text, redact_model_args, redact_url
from lmms_eval_plugins.task_list import _IgnoreTags

SAMPLE_SUFFIX = "_sample"
EXAMPLE_CHARS = 160


# ------------------------------------------------------------------------------------------------ task selection


@dataclass(frozen=True)
class TaskEntry:
    name: str
    kind: str  # "task" | "group"
    yaml_path: Path
    members: tuple[str, ...] = ()

    @property
    def benchmark(self) -> str:
        from lmms_eval_plugins.benchmark import benchmark_of_task

        spec = benchmark_of_task(self.name)
        return spec.name if spec is not None else self.yaml_path.parent.name


def task_index(folder: Path | None = None) -> dict[str, TaskEntry]:
    """Every task and group below ``folder`` (default: the task folders of every installed benchmark),
    with its YAML path (groups with their members)."""
    import yaml

    from lmms_eval_plugins.discovery import plugin_task_dirs

    index: dict[str, TaskEntry] = {}
    folders = [folder] if folder is not None else [Path(f) for f in plugin_task_dirs()]
    for path in sorted({p for f in folders for p in f.rglob("*.yaml")}):
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_IgnoreTags) or {}
        if isinstance(config.get("group"), str) and isinstance(config.get("task"), list):
            members = tuple(t for t in config["task"] if isinstance(t, str))
            index[config["group"]] = TaskEntry(config["group"], "group", path, members)
        elif isinstance(config.get("task"), str):
            index[config["task"]] = TaskEntry(config["task"], "task", path)
    return index


def leaf_sample_tasks(index: Mapping[str, TaskEntry]) -> list[str]:
    """Every leaf task named `*_sample` (check-model reports per leaf task, not per group)."""
    return sorted(name for name, entry in index.items() if entry.kind == "task" and name.endswith(SAMPLE_SUFFIX))


def select_tasks(selection: str | None, index: Mapping[str, TaskEntry]) -> list[str]:
    """``--tasks``: sample tasks, sample groups or benchmark names (comma-separated); default: all sample tasks."""
    all_sample = leaf_sample_tasks(index)
    if not selection:
        return all_sample
    chosen: list[str] = []
    for item in (s.strip() for s in selection.split(",")):
        if not item:
            continue
        entry = index.get(item)
        by_benchmark = [t for t in all_sample if index[t].benchmark == item]
        if by_benchmark:  # a benchmark name (also the name of its full-data group): its sample tasks
            names = by_benchmark
        elif entry is not None and entry.kind == "group":
            names = [m for m in entry.members if m in index]
        elif entry is not None:
            names = [item]
        else:
            names = []
        if not names:
            raise SystemExit(f"check-model: {item!r} is not a task, group or benchmark of lmms-eval-plugins "
                             f"(sample tasks: {', '.join(all_sample)})")
        chosen += [n for n in names if n not in chosen]
    return chosen


# ------------------------------------------------------------------------------------------------ request shapes


@dataclass
class Shapes:
    requests: int = 0
    images: list[int] = field(default_factory=list)  # per request
    videos: list[int] = field(default_factory=list)  # per request
    frames_per_request: list[int] = field(default_factory=list)  # frames of all frame-list videos in a request
    frames_per_video: list[int] = field(default_factory=list)
    video_files: int = 0  # videos given as a path (the model class decodes them itself)
    text_parts: list[int] = field(default_factory=list)
    interleaved: int = 0  # requests with text between two visuals
    max_size: tuple[int, int] = (0, 0)  # largest image or frame (width, height)
    issues: list[str] = field(default_factory=list)
    error: str | None = None
    intents: list[DocIntent] = field(default_factory=list, repr=False)  # per doc: what to compare the sent bodies with

    def summary(self) -> dict[str, Any]:
        def span(values: Sequence[int]) -> str:
            if not values:
                return "0"
            lo, hi = min(values), max(values)
            return str(lo) if lo == hi else f"{lo}-{hi}"

        return {
            "requests": self.requests,
            "images": span(self.images),
            "videos": span(self.videos),
            "frames_per_video": span(self.frames_per_video),
            "frames_per_request": span(self.frames_per_request),
            "video_files": self.video_files,
            "text_parts": span(self.text_parts),
            "interleaved_requests": self.interleaved,
            "max_size": f"{self.max_size[0]}x{self.max_size[1]}" if self.max_size != (0, 0) else "",
            "issues": self.issues[:10],
            "error": self.error,
        }


@dataclass
class DocIntent:
    """What the task means to send for one doc: its text signature (as the proxy computes it from a sent
    body) and its visuals grouped into runs between text parts, each visual ``("image", size)``,
    ``("video", [frame sizes])`` or ``("video_file", None)`` (a path the model class decodes)."""

    index: int
    signature: str
    runs: list[list[tuple[str, Any]]]


def doc_intent(messages: Any, index: int) -> DocIntent:
    """The :class:`DocIntent` of one request's chat messages (lmms-eval's ``doc_to_messages`` format)."""
    from lmms_eval_plugins.recording_proxy import text_signature

    texts: list[str] = []
    runs: list[list[tuple[str, Any]]] = [[]]
    for message in messages or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        parts = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for part in parts:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                texts.append(str(part.get("text", "")))
                runs.append([])
            elif kind == "image":
                runs[-1].append(("image", _size(part.get("url") or part.get("image"))))
            elif kind == "video":
                url = part.get("url") if "url" in part else part.get("video")
                if isinstance(url, (list, tuple)):
                    runs[-1].append(("video", [_size(f) for f in url]))
                else:
                    runs[-1].append(("video_file", None))
    return DocIntent(index, text_signature(texts), [run for run in runs if run])


def _size(item: Any) -> tuple[int, int] | None:
    size = getattr(item, "size", None)
    return tuple(size) if isinstance(size, tuple) and len(size) == 2 else None  # type: ignore[return-value]


def measure_messages(messages: Any, shapes: Shapes, *, where: str) -> None:
    """Add one request's chat messages (lmms-eval's ``doc_to_messages`` format) to ``shapes``."""
    images = videos = frames = texts = 0
    kinds: list[str] = []
    first_video_frames: int | None = None
    for message in messages or []:
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            texts += 1
            kinds.append("text")
            continue
        for part in content or []:
            kind = part.get("type") if isinstance(part, Mapping) else None
            if kind == "text":
                texts += 1
                kinds.append("text")
            elif kind == "image":
                images += 1
                kinds.append("visual")
                size = _size(part.get("url") or part.get("image"))
                if size:
                    shapes.max_size = max(shapes.max_size, size, key=lambda s: s[0] * s[1])
            elif kind == "video":
                videos += 1
                kinds.append("visual")
                url = part.get("url") if "url" in part else part.get("video")
                if isinstance(url, (list, tuple)):
                    n = len(url)
                    frames += n
                    shapes.frames_per_video.append(n)
                    if n == 0:
                        shapes.issues.append(f"{where}: video {videos} is an empty frame list (crashes lmms-eval's qwen2_5_vl)")
                    sizes = {s for s in (_size(f) for f in url) if s}
                    if len(sizes) > 1:
                        shapes.issues.append(f"{where}: video {videos} mixes frame sizes {sorted(sizes)} (qwen2_5_vl needs one size per video)")
                    for s in sizes:
                        shapes.max_size = max(shapes.max_size, s, key=lambda v: v[0] * v[1])
                    if first_video_frames is None:
                        first_video_frames = n
                    elif n < first_video_frames:
                        shapes.issues.append(f"{where}: video {videos} has fewer frames ({n}) than video 1 ({first_video_frames}); "
                                             "fine as frame lists, a crash in qwen2_5_vl if these were video files")
                else:
                    shapes.video_files += 1
    shapes.requests += 1
    shapes.images.append(images)
    shapes.videos.append(videos)
    shapes.frames_per_request.append(frames)
    shapes.text_parts.append(texts)
    visual_positions = [i for i, k in enumerate(kinds) if k == "visual"]
    if len(visual_positions) > 1 and any(k == "text" for k in kinds[visual_positions[0]: visual_positions[-1]]):
        shapes.interleaved += 1


def _source_rows(config: Mapping[str, Any]) -> list[dict[str, Any]]:
    files = (config.get("dataset_kwargs") or {}).get("data_files") or {}
    split = config.get("test_split") or "test"
    path = files.get(split) if isinstance(files, Mapping) else files
    if isinstance(path, list):
        path = path[0]
    if not path:
        raise ValueError("the task has no local data_files to read")
    text = Path(path).read_text(encoding="utf-8").strip()
    if text.startswith("["):
        return list(json.loads(text))
    return read_jsonl(Path(path))


def _call_doc_fn(fn: Any, doc: Any, specific: Any) -> Any:
    import inspect

    params = inspect.signature(fn).parameters
    if specific is not None and ("lmms_eval_specific_kwargs" in params or len(params) == 2):
        return fn(doc, lmms_eval_specific_kwargs=specific)
    return fn(doc)


def request_shapes(entry: TaskEntry, limit: int | None, model: str | None = None) -> Shapes:
    """Run the task's ``process_docs`` and ``doc_to_messages`` in this process (see the module docstring).

    ``model``: the lmms-eval model name, which picks the task's ``lmms_eval_specific_kwargs`` like lmms-eval does."""
    import os

    from lmms_eval.utils import load_yaml_config

    from lmms_eval_plugins.cli_run import OFFLINE_ENV

    shapes = Shapes()
    saved = {k: os.environ.get(k) for k in OFFLINE_ENV}
    os.environ.update(OFFLINE_ENV)  # sample tasks read bundled data: never wait on the hub
    try:
        config = load_yaml_config(str(entry.yaml_path), mode="full")
        process_docs, to_messages = config.get("process_docs"), config.get("doc_to_messages")
        if not callable(to_messages):
            raise ValueError("the task defines no doc_to_messages")
        docs = _source_rows(config)
        if callable(process_docs):
            docs = process_docs(docs)
        specific = config.get("lmms_eval_specific_kwargs")
        if isinstance(specific, Mapping):
            specific = specific[model] if model and model in specific else specific.get("default", specific)
        n = len(docs) if limit is None else min(limit, len(docs))
        for i in range(n):
            messages = _call_doc_fn(to_messages, docs[i], specific)
            measure_messages(messages, shapes, where=f"doc {i}")
            shapes.intents.append(doc_intent(messages, i))
    except Exception as exc:  # reported, never fatal: the lmms-eval run is the real check
        shapes.error = f"{type(exc).__name__}: {exc}"[:500]
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return shapes


# ------------------------------------------------------------------------------------------------ what was sent

# Model classes that, without ``base_url`` in --model_args, read ``OPENAI_API_BASE`` (then the OpenAI
# client's ``OPENAI_BASE_URL``, then api.openai.com); names as lmms-eval 0.7.3 registers them.
OPENAI_API_BASE_MODELS = frozenset({"openai", "openai_compatible", "openai_compatible_chat",
                                    "async_openai", "async_openai_compatible_chat", "async_openai_compatible"})
LITELLM_MODELS = frozenset({"litellm", "litellm_chat", "litellm_compatible"})  # OPENAI_API_BASE only, else per provider
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def split_model_args(model_args: str | None) -> list[str]:
    """``--model_args`` split like lmms-eval does (commas inside quotes or braces do not split)."""
    if not model_args or not model_args.strip():
        return []
    from lmms_eval_plugins.compat.private import split_model_args as split_like_lmms_eval

    return [a for a in split_like_lmms_eval(model_args.strip()) if a.strip()]


def model_arg(model_args: str | None, name: str) -> str | None:
    for arg in split_model_args(model_args):
        key, _, value = arg.partition("=")
        if key.strip() == name:
            return value.strip().strip("'\"")
    return None


def replace_model_arg(model_args: str | None, name: str, value: str) -> str:
    args = split_model_args(model_args)
    out = [f"{name}={value}" if a.partition("=")[0].strip() == name else a for a in args]
    return ",".join(out if any(a.partition("=")[0].strip() == name for a in args) else [*out, f"{name}={value}"])


def display_model_args(model_args: str | None) -> str | None:
    """``--model_args`` for the report: the values of keys, tokens, secrets and passwords replaced by ``***``."""
    if model_args is None:
        return None
    return redact_model_args(model_args, split_model_args)


def lmms_eval_dotenv() -> dict[str, str]:
    """The ``.env`` values lmms-eval's API classes load (``load_dotenv()`` in their module: the first
    ``.env`` above ``lmms_eval/models/``; it never overrides a variable already set)."""
    import importlib.util

    try:
        from dotenv import dotenv_values

        spec = importlib.util.find_spec("lmms_eval")
        origin = Path(spec.origin).parent / "models" / "chat" if spec and spec.origin else None
    except ImportError:  # pragma: no cover - python-dotenv ships with lmms-eval
        return {}
    for folder in [origin, *origin.parents] if origin else []:
        if (folder / ".env").is_file():
            return {k: v for k, v in dotenv_values(folder / ".env").items() if v is not None}
    return {}


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


@dataclass
class ObservePlan:
    """How check-model sees what the model class sends: ``upstream`` is the real endpoint the proxy
    forwards to (None: not observable, ``reason`` says why); ``via`` is what is pointed at the proxy."""

    upstream: str | None = None
    via: str = ""  # "base_url" (the model arg) | "OPENAI_API_BASE" (the env variable the class falls back to)
    reason: str = ""
    trust_env: bool = True


def observe_plan(model: str, model_args: str | None, env: Mapping[str, str]) -> ObservePlan:
    """Whether (and how) what ``model`` sends can be recorded: API classes only, never by guessing."""
    from urllib.parse import unquote

    trust_env = not (model_arg(model_args, "httpx_trust_env") or "true").strip().lower() in ("0", "false", "no", "off")
    if _truthy(model_arg(model_args, "azure_openai")):
        return ObservePlan(reason="not observable: azure_openai=True reads AZURE_OPENAI_API_BASE, which check-model does not proxy")
    base_url = model_arg(model_args, "base_url")
    if base_url:
        return ObservePlan(unquote(base_url).rstrip("/"), "base_url", trust_env=trust_env)
    if model in OPENAI_API_BASE_MODELS or (model in LITELLM_MODELS and env.get("OPENAI_API_BASE")):
        upstream = env.get("OPENAI_API_BASE") or (env.get("OPENAI_BASE_URL") if model in OPENAI_API_BASE_MODELS else None)
        return ObservePlan(unquote(upstream or DEFAULT_OPENAI_BASE_URL).rstrip("/"), "OPENAI_API_BASE", trust_env=trust_env)
    if model in LITELLM_MODELS:
        return ObservePlan(reason="not observable: litellm without base_url (or OPENAI_API_BASE) routes per provider; "
                                  "give base_url= to observe what it sends")
    return ObservePlan(reason="not observable: a local model class (check-model sees only what API classes send, "
                              "through base_url or OPENAI_API_BASE)")


def _wh(size: Any) -> str:
    return f"{size[0]}x{size[1]}" if size else "?"


def _sizes_text(sizes: Sequence[Any]) -> str:
    return ", ".join(sorted({_wh(s) for s in sizes}))


def compare_runs(intent: DocIntent, items: Sequence[Any]) -> list[str]:
    """Differences between what a doc meant to send and the content items of the body that was sent
    (:func:`lmms_eval_plugins.recording_proxy.chat_items`), visuals compared run by run (a run: the
    visuals between two text parts; a video's frames arrive as a run of ``image_url`` items)."""
    sent: list[list[Any]] = [[]]
    for item in items:
        if item == "text":
            sent.append([])
        else:
            sent[-1].append(item)
    sent = [run for run in sent if run]
    if len(sent) != len(intent.runs):
        return [f"{len(intent.runs)} groups of visuals between text parts intended, {len(sent)} sent"]
    diffs: list[str] = []
    video = image = 0
    for want, got in zip(intent.runs, sent):
        got_sizes = [g for g in got if isinstance(g, list)]
        others = sorted({str(g) for g in got if isinstance(g, str)})
        if others:  # e.g. video_url: the server decodes the video
            diffs.append(f"sent as {', '.join(others)}")
        kinds = [kind for kind, _ in want]
        if len(want) == 1 and kinds[0] == "video":
            video += 1
            frames = want[0][1]
            n, m = len(frames), len(got)
            if n != m:
                why = " (padding)" if m == n + 1 and n % 2 == 1 else " (frames dropped)" if m < n else " (frames added)"
                diffs.append(f"video {video}: {n} frames intended, {m} sent{why}")
            want_sizes = _sizes_text([f for f in frames if f])
            if got_sizes and want_sizes and want_sizes != _sizes_text(got_sizes):
                diffs.append(f"frames resized {want_sizes} -> {_sizes_text(got_sizes)}")
        elif len(want) == 1 and kinds[0] == "image":
            image += 1
            if len(got) != 1:
                diffs.append(f"image {image}: sent as {len(got)} images")
            elif got_sizes and want[0][1] and _wh(want[0][1]) != _wh(got_sizes[0]):
                diffs.append(f"image resized {_wh(want[0][1])} -> {_wh(got_sizes[0])}")
        else:  # several visuals without text between them, or a video file the class decodes itself
            video += kinds.count("video") + kinds.count("video_file")
            image += kinds.count("image")
            if "video_file" in kinds:
                continue  # the frame count of a file is the class's choice: reported, not compared
            n = sum(1 if kind == "image" else len(value) for kind, value in want)
            if n != len(got):
                diffs.append(f"{len(want)} visuals without text between them: {n} images/frames intended, {len(got)} sent")
    return list(dict.fromkeys(diffs))  # one line per kind of difference (every video resized alike: once)


def _span(values: Sequence[int]) -> str:
    if not values:
        return "0"
    lo, hi = min(values), max(values)
    return str(lo) if lo == hi else f"{lo}-{hi}"


def observed_summary(records: Sequence[Any], intents: Sequence[DocIntent], *, endpoint: str) -> dict[str, Any]:
    """What the model class sent for one task, from the proxy's records of its chat-completions requests."""
    by_signature = {intent.signature: intent for intent in intents}
    chat = [r for r in records if r.chat is not None]
    distinct: dict[str, Any] = {}  # body digest -> record: retries of one request counted once
    for record in chat:
        distinct.setdefault(record.body_sha256, record)
    images_per_request: list[int] = []
    frames_per_video: list[int] = []
    sizes: collections.Counter[str] = collections.Counter()
    differences: dict[str, list[int]] = {}
    compared: set[int] = set()
    unmatched = 0
    for record in distinct.values():
        items = record.chat["items"]
        images = [i for i in items if i is None or isinstance(i, list)]
        images_per_request.append(len(images))
        sizes.update(_wh(i) for i in images)
        runs: list[int] = []
        count = 0
        for item in [*items, "text"]:
            if item == "text":
                if count:
                    runs.append(count)
                count = 0
            elif item is None or isinstance(item, list):
                count += 1
        intent = by_signature.get(record.chat["signature"])
        if intent is None:
            unmatched += 1
            frames_per_video += [n for n in runs if n > 1]  # no intent to tell images from videos: runs of 2+
            continue
        if len(runs) == len(intent.runs):
            frames_per_video += [n for n, want in zip(runs, intent.runs) if any(k in ("video", "video_file") for k, _ in want)]
        if intent.index in compared:
            continue  # the same doc sent again with a different body: compare the first
        compared.add(intent.index)
        for diff in compare_runs(intent, items):
            differences.setdefault(diff, []).append(intent.index)
    notes = [f"{diff} (doc{'s' if len(set(docs)) > 1 else ''} {', '.join(map(str, sorted(set(docs))))})"
             for diff, docs in differences.items()]
    not_seen = [i.index for i in intents if i.index not in compared]
    if intents and not_seen and len(compared) + unmatched < len(intents):
        notes.append(f"no request observed for {len(not_seen)} of {len(intents)} docs")
    if unmatched:
        notes.append(f"{unmatched} request(s) matched no doc's text (not compared)")
    failed = [r for r in chat if r.status is None or r.status >= 400]
    return {
        "observable": True,
        "endpoint": endpoint,
        "requests": len(chat),
        "distinct_requests": len(distinct),
        "images_per_request": _span(images_per_request),
        "frames_per_video": _span(frames_per_video),
        "image_sizes": dict(sizes.most_common()),
        "error_replies": len(failed),
        "differences": notes,
    }


def attribute_records(records: Sequence[Any], intents_by_task: Mapping[str, Sequence[DocIntent]]) -> dict[str | None, list[Any]]:
    """Chat records of one lmms-eval run per task, by the text signature of the doc they came from
    (one task in the run: all of them; a body that matches no task: under ``None``)."""
    tasks = list(intents_by_task)
    out: dict[str | None, list[Any]] = {task: [] for task in tasks}
    out[None] = []
    owner = {intent.signature: task for task in tasks for intent in intents_by_task[task]}
    for record in records:
        if record.chat is None:
            continue
        task = tasks[0] if len(tasks) == 1 else owner.get(record.chat["signature"])
        out[task].append(record)
    return out


# ------------------------------------------------------------------------------------------------ compliance


@dataclass
class TaskReport:
    task: str
    benchmark: str
    completed: bool
    error: str | None = None
    requests: int = 0
    parsed: int | None = None
    compliance: float | None = None  # percent
    compliance_source: str = ""  # which logged field (or metric) the compliance was computed from
    typical_failure: dict[str, Any] | None = None
    failures: dict[str, int] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    shapes: dict[str, Any] = field(default_factory=dict)
    failed_requests: int = 0  # requests the model class gave up on (its failure marker instead of a reply)
    observed: dict[str, Any] = field(default_factory=dict)  # what the model class sent (API classes), see observed_summary


def _reply_text(sample: Mapping[str, Any]) -> str:
    value: Any = sample.get("resps", sample.get("filtered_resps"))
    while isinstance(value, (list, tuple)) and value:
        value = value[0]
    if isinstance(value, str) and value.startswith("{"):  # a judged reply, logged as the filter's JSON
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if isinstance(value, Mapping):
        value = value.get("text", value)
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _item_status(item: Mapping[str, Any]) -> tuple[str, str | None] | None:
    """(kind, error) of one per-record item, or None when it says nothing about the reply's format.

    Our tasks log one of: ``parse_error`` (None when the reply was read); ``format_ok`` with ``missing``
    ({part: reason}, ViRectify's tagged format); or, for free-form judged answers, only a ``judge``
    outcome, where a reply with nothing to judge (``skipped``) is the format failure.
    """
    if "parse_error" in item:
        error = item["parse_error"]
        return "parse_error", None if error is None else str(error)
    if "format_ok" in item:
        if item["format_ok"]:
            return "format_ok", None
        missing = item.get("missing") or {}
        return "format_ok", "; ".join(f"{k}: {v}" for k, v in missing.items()) if isinstance(missing, Mapping) and missing else "format not valid"
    judge = item.get("judge")
    if isinstance(judge, Mapping):
        return "judged", "nothing to judge (no answer found in the reply)" if judge.get("skipped") and not judge.get("error") else None
    return None


def _parse_item(sample: Mapping[str, Any], metric_names: Sequence[str]) -> tuple[str, str | None] | None:
    """(kind, parse error) from the first per-record item of a logged sample that says something about the format."""
    for value in [*(sample.get(name) for name in metric_names), *sample.values()]:
        if isinstance(value, Mapping):
            status = _item_status(value)
            if status is not None:
                return status
    return None


def failed_reply(sample: Mapping[str, Any]) -> str | None:
    """The model class's failure marker text in a logged sample's replies (``resps``, then
    ``filtered_resps``), or None when the request got a reply (see :mod:`lmms_eval_plugins.outcome`)."""
    from lmms_eval_plugins.outcome import request_failure

    def find(value: Any) -> str | None:
        if isinstance(value, (list, tuple)):
            for item in value:
                found = find(item)
                if found:
                    return found
            return None
        if isinstance(value, str) and value.startswith("{"):  # a judged reply, logged as the filter's JSON
            try:
                decoded = json.loads(value)
            except json.JSONDecodeError:
                decoded = None
            if isinstance(decoded, Mapping):
                return find(decoded.get("text"))
        return value.strip() if isinstance(value, str) and request_failure(value) else None

    return find(sample.get("resps")) or find(sample.get("filtered_resps"))


def _short(text: str, limit: int = EXAMPLE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compliance_from_samples(samples: Sequence[Mapping[str, Any]], metric_names: Sequence[str]) -> dict[str, Any] | None:
    """Compliance, failure counts and one example per failure from logged samples (None: no parse items)."""
    parsed = total = 0
    counts: collections.Counter[str] = collections.Counter()
    examples: dict[str, str] = {}
    kinds: collections.Counter[str] = collections.Counter()
    for sample in samples:
        if failed_reply(sample):
            continue  # no reply to read: counted as a failed request, not as a format failure
        found = _parse_item(sample, metric_names)
        if found is None:
            continue
        total += 1
        kinds[found[0]] += 1
        error = found[1]
        if error is None:
            parsed += 1
            continue
        key = _normalise_error(str(error))
        counts[key] += 1
        examples.setdefault(key, _reply_text(sample))
    if total == 0:
        return None
    typical = None
    if counts:
        error, count = counts.most_common(1)[0]
        typical = {"parse_error": error, "count": count, "example_output": _short(examples[error])}
    source = {"parse_error": "logged parse_error", "format_ok": "logged format_ok",
              "judged": "judged replies: not skipped by the judge"}[kinds.most_common(1)[0][0]]
    return {"requests": total, "parsed": parsed, "compliance": 100.0 * parsed / total,
            "failures": dict(counts.most_common()), "typical_failure": typical, "source": source}


def _normalise_error(error: str) -> str:
    """Group parse errors that differ only in the reply's content ("letter A not among ..." stays as is)."""
    return _short(error, 120)


def compliance_from_metrics(metrics: Mapping[str, Any], n_requests: int) -> dict[str, Any] | None:
    fails = {k: v for k, v in metrics.items() if k.endswith("parse_fail") and isinstance(v, (int, float))}
    if not fails or n_requests <= 0:
        return None
    name = "parse_fail" if "parse_fail" in fails else sorted(fails)[0]
    failed = min(float(fails[name]), n_requests)
    return {"requests": n_requests, "parsed": int(n_requests - failed), "compliance": 100.0 * (1 - failed / n_requests),
            "source": f"{name} metric"}


_EXC_LINE = re.compile(r"^\s*(?:\S+\.)?(\w*(?:Error|Exception|Exceeded))\b:?\s*(.*)$")


def last_exception(output: str) -> str | None:
    """The last ``SomethingError: message`` line of an lmms-eval log (None: none found).

    lmms-eval retries dataset building (tenacity), so the last line is often a ``RetryError`` that only
    names the real error's class; the real error's own line, printed above it, is preferred.
    """
    found: list[str] = []
    for line in output.splitlines():
        clean = re.sub(r"\x1b\[[0-9;]*m", "", line)
        match = _EXC_LINE.match(clean.split(" - ", 1)[-1])
        if match and match.group(1) not in ("Error", "Exception"):
            found.append(_short(f"{match.group(1)}: {match.group(2)}", 300))
    real = [f for f in found if not f.startswith("RetryError")]
    return (real or found or [None])[-1]


# ------------------------------------------------------------------------------------------------ running


def _metrics(results: Mapping[str, Any], task: str) -> dict[str, Any]:
    raw = results.get("results", {}).get(task) or {}
    return {k.split(",")[0]: v for k, v in raw.items() if k != "alias"}


def _headline(metrics: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if isinstance(v, (int, float)) and not k.endswith("_stderr")}


def run_tasks(tasks: Sequence[str], *, model: str, model_args: str | None, output_dir: Path, limit: int | None,
              extra_args: Sequence[str], env: Mapping[str, str], timeout: float):
    from lmms_eval_plugins.cli_run import run_lmms_eval

    args = list(extra_args)
    if limit is not None:
        args += ["--limit", str(limit)]
    return run_lmms_eval(tasks=list(tasks), model=model, model_args=model_args, output_dir=output_dir, env=env,
                         extra_args=args, timeout=timeout)


def check_model(*, model: str, model_args: str | None, tasks: Sequence[str], limit: int | None = None,
                output_dir: Path, extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                timeout: float = 3600, retry_missing: bool = True, shapes: bool = True,
                observe: bool = True) -> list[TaskReport]:
    """Run ``tasks`` with the model and build one :class:`TaskReport` per task.

    ``observe``: for API model classes, record what the class sends through a loopback proxy in front
    of its endpoint (:mod:`lmms_eval_plugins.recording_proxy`); the proxy stops before this returns.
    """
    import os

    from lmms_eval_plugins.recording_proxy import RecordingProxy, sanitise_url

    index = task_index()
    env = dict(env or {})
    plan = observe_plan(model, model_args, {**lmms_eval_dotenv(), **os.environ, **env}) if observe else ObservePlan(reason="not observed (--no-observe)")
    proxy = RecordingProxy(plan.upstream, trust_env=plan.trust_env) if plan.upstream else None
    run_args, run_env = model_args, dict(env)
    runs: dict[str, Any] = {}
    labels: dict[str, str] = {}
    try:
        if proxy is not None:
            proxy.start()
            if plan.via == "base_url":
                run_args = replace_model_arg(model_args, "base_url", proxy.base_url)
            else:
                run_env["OPENAI_API_BASE"] = proxy.base_url
            no_proxy = ",".join(v for v in (os.environ.get("NO_PROXY") or os.environ.get("no_proxy"), "127.0.0.1", "localhost") if v)
            run_env.update({"NO_PROXY": no_proxy, "no_proxy": no_proxy})  # the class reaches the proxy directly

        def run(names: Sequence[str], label: str):
            if proxy is not None:
                proxy.label = label
            return run_tasks(names, model=model, model_args=run_args, output_dir=output_dir / label, limit=limit,
                             extra_args=extra_args, env=run_env, timeout=timeout)

        first = run(tasks, "all")
        runs = {task: first for task in tasks}
        labels = {task: "all" for task in tasks}
        missing = [t for t in tasks if t not in first.results.get("results", {})]
        if retry_missing and missing and len(tasks) > 1:
            for task in missing:  # alone, so one crashing task cannot hide the others
                runs[task], labels[task] = run([task], task), task
    finally:
        if proxy is not None:
            proxy.stop()

    shape_list = {task: request_shapes(index[task], limit, model) for task in tasks} if shapes or proxy is not None else {}
    observed: dict[str, dict[str, Any]] = {}
    if proxy is not None:
        endpoint = sanitise_url(plan.upstream or "")
        for label in sorted(set(labels.values())):
            in_run = [t for t in tasks if labels[t] == label]
            by_task = attribute_records(proxy.records_for(label), {t: shape_list[t].intents for t in in_run})
            for task in in_run:
                observed[task] = observed_summary(by_task[task], shape_list[task].intents, endpoint=endpoint)
            if by_task[None]:
                for task in in_run:  # bodies that matched no task of a run are shown with each task of that run
                    observed[task]["differences"].append(
                        f"{len(by_task[None])} request(s) in this lmms-eval run matched no doc of any task")
    reports = []
    for task in tasks:
        entry = index[task]
        task_run = runs[task]
        completed = task in task_run.results.get("results", {})
        report = TaskReport(task, entry.benchmark, completed)
        if not completed:
            report.error = last_exception(task_run.output) or (
                "lmms-eval wrote no results file" if task_run.results_path is None else "no results for this task")
        else:
            report.metrics = _headline(_metrics(task_run.results, task))
            n_requests = int((task_run.results.get("n-samples", {}).get(task) or {}).get("effective", 0))
            metric_names = list(_metrics(task_run.results, task))
            stats = None
            samples: list[dict[str, Any]] | None = None
            try:
                samples = task_run.samples(task)
                stats = compliance_from_samples(samples, metric_names)
            except (FileNotFoundError, AssertionError, DataError, json.JSONDecodeError):  # none logged, or malformed
                pass
            if samples is not None:
                failures = [f for f in map(failed_reply, samples) if f]
                report.failed_requests, total = len(failures), len(samples)
                first_failure = failures[0] if failures else ""
            else:  # no logged samples: the tasks' ``unscored`` metric counts the failed requests
                unscored = report.metrics.get("unscored")
                report.failed_requests = int(unscored) if isinstance(unscored, (int, float)) else 0
                total, first_failure = n_requests, "(from the unscored metric; no logged samples to show the error)"
            if stats is None:
                stats = compliance_from_metrics(report.metrics, n_requests - report.failed_requests)
            report.requests = stats["requests"] + report.failed_requests if stats else n_requests
            if stats:
                report.parsed, report.compliance = stats["parsed"], stats["compliance"]
                report.failures = stats.get("failures", {})
                report.typical_failure = stats.get("typical_failure")
                report.compliance_source = stats["source"]
            if report.failed_requests:  # lmms-eval finished, but the model never answered these
                report.completed = False
                report.error = f"{report.failed_requests} of {total} model requests failed: {_short(first_failure, 300)}"
        if shapes:
            report.shapes = shape_list[task].summary()
        report.observed = observed.get(task) or {"observable": False, "reason": plan.reason or "not observed"}
        reports.append(report)
    return reports


# ------------------------------------------------------------------------------------------------ output


def _cell(text: Any) -> str:
    return md_text(text)  # task names, errors and replies are untrusted: no raw HTML in the Markdown


def _observed_cell(observed: Mapping[str, Any]) -> str:
    if not observed.get("observable"):
        return "not observable"
    sizes = list(observed.get("image_sizes") or {})
    text = (f"{observed['requests']} req, images/req {observed['images_per_request']}, frames/video "
            f"{observed['frames_per_video']}, sizes {', '.join(sizes[:3]) or '-'}{', ...' if len(sizes) > 3 else ''}")
    return text + ("; **differs** (notes)" if observed.get("differences") else "")


def markdown(reports: Sequence[TaskReport], *, model: str, model_args: str | None) -> str:
    shown_args = display_model_args(model_args)
    lines = [
        f"## check-model: {md_code(model)}" + (f" ({md_code(shown_args)})" if shown_args else ""),
        "",
        "| task | completed | format compliance | typical failure (count): example output | requests | images/req | videos/req | frames/video | frames/req | interleaved | sent (observed) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in reports:
        s = r.shapes or {}
        answered = r.requests - r.failed_requests
        compliance = "n/a" if r.compliance is None else f"{r.compliance:.1f}% ({r.parsed}/{answered})"
        if not r.completed:
            failure = f"**{'requests failed' if r.failed_requests else 'run failed'}**: {_cell(r.error)}"
        elif r.typical_failure:
            t = r.typical_failure
            failure = f"{_cell(t['parse_error'])} ({t['count']}): {md_code(t['example_output'])}"
        else:
            failure = "-"
        interleaved = f"{s.get('interleaved_requests', 0)}/{s.get('requests', 0)}" if s else ""
        lines.append(f"| {_cell(r.task)} | {'yes' if r.completed else '**NO**'} | {compliance} | {failure} | {r.requests} | "
                     f"{s.get('images', '')} | {s.get('videos', '')} | {s.get('frames_per_video', '')} | "
                     f"{s.get('frames_per_request', '')} | {interleaved} | {_cell(_observed_cell(r.observed or {}))} |")
    notes = []
    for r in reports:
        s = r.shapes or {}
        if s.get("error"):
            notes.append(f"- {_cell(r.task)}: request shapes not computed: {_cell(s['error'])}")
        for issue in s.get("issues", []):
            notes.append(f"- {_cell(r.task)}: {_cell(issue)}")
        if s.get("video_files"):
            notes.append(f"- {_cell(r.task)}: {s['video_files']} video(s) sent as file paths (the model class decodes them)")
        for difference in (r.observed or {}).get("differences", []):
            notes.append(f"- {_cell(r.task)}: sent differs from intended: {_cell(difference)}")
    observed = [r.observed for r in reports if (r.observed or {}).get("observable")]
    if observed:
        sent = (f"Sent: what the model class sent to {_cell(redact_url(str(observed[0]['endpoint'])))}, recorded by a loopback proxy "
                "(image_url items per request, runs of consecutive images between text parts per video, image sizes as received).")
    else:
        reason = next((r.observed.get("reason") for r in reports if r.observed), "") or "not observable"
        sent = f"Sent: {_cell(reason)}."
    done = sum(r.completed for r in reports)
    lines += ["", f"{done}/{len(reports)} tasks completed (a task with a failed model request is not). Compliance: share "
              "of answered requests whose reply the task's parser could read (unreadable replies are scored wrong). Shapes: "
              "from the task's doc_to_messages on the same docs; frames are PIL images in `{\"type\": \"video\", \"url\": [...]}`. "
              + sent]
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins check-model",
        description="Run every *_sample task of lmms-eval-plugins with a model and report, per task, whether it completed, "
        "the share of replies the task's parser could read, the typical unreadable reply, and the request shapes.")
    parser.add_argument("--model", required=True, help="lmms-eval model name (built-in, or registered via the lmms_eval.models entry point)")
    parser.add_argument("--model_args", default=None, help="as for lmms-eval, e.g. pretrained=...,device=cpu,device_map=cpu")
    parser.add_argument("--tasks", default=None, help="comma-separated sample tasks, sample groups or benchmark names (default: every *_sample task)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many docs per task")
    parser.add_argument("--json", dest="json_out", default=None, metavar="OUT", help="also write the report as JSON")
    parser.add_argument("--output_path", default=None, help="where lmms-eval writes its results (default: a temporary folder)")
    parser.add_argument("--gen_kwargs", default=None, help="passed to lmms-eval, e.g. max_new_tokens=256")
    parser.add_argument("--judge", choices=("offline", "llm"), default="offline",
                        help="judge for judged tasks: offline (default, no endpoint needed) or llm (needs OPENAI_* settings)")
    parser.add_argument("--no-shapes", action="store_true", help="skip computing request shapes")
    parser.add_argument("--no-observe", action="store_true",
                        help="do not put the recording proxy in front of an API model class's endpoint")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per lmms-eval run")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    tasks = select_tasks(args.tasks, task_index())
    extra = ["--gen_kwargs", args.gen_kwargs] if args.gen_kwargs else []
    env = {"LMMS_EVAL_PLUGINS_JUDGE": args.judge}  # "offline" or "llm", both understood by the judges
    print(f"check-model: {len(tasks)} task(s) with --model {args.model}: {', '.join(tasks)}", file=sys.stderr)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="check-model-") as tmp:
        output_dir = Path(args.output_path) if args.output_path else Path(tmp)
        reports = check_model(model=args.model, model_args=args.model_args, tasks=tasks, limit=args.limit,
                              output_dir=output_dir, extra_args=extra, env=env, timeout=args.timeout,
                              shapes=not args.no_shapes, observe=not args.no_observe)
    print(markdown(reports, model=args.model, model_args=args.model_args))
    ok = all(r.completed for r in reports)
    if args.json_out:
        payload = {"model": args.model, "model_args": display_model_args(args.model_args), "limit": args.limit, "all_completed": ok,
                   "seconds": round(time.perf_counter() - start, 1), "tasks": [asdict(r) for r in reports]}
        Path(args.json_out).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
