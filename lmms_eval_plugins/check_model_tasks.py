"""``check-model``: which sample tasks to check, and the requests each one sends (computed in this
process from the task's YAML and hooks, not from the model; see :mod:`lmms_eval_plugins.check_model`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_eval_plugins.data import read_jsonl
from lmms_eval_plugins.yaml_index import read_task_yamls

SAMPLE_SUFFIX = "_sample"


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
    from lmms_eval_plugins.discovery import plugin_task_dirs

    index: dict[str, TaskEntry] = {}
    folders = [folder] if folder is not None else [Path(f) for f in plugin_task_dirs()]
    for entry in read_task_yamls(folders):
        if entry.kind:
            members = tuple(t for t in entry.members if isinstance(t, str))
            index[entry.name] = TaskEntry(entry.name, entry.kind, entry.path, members)
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
            raise SystemExit(
                f"check-model: {item!r} is not a task, group or benchmark of lmms-eval-plugins "
                f"(sample tasks: {', '.join(all_sample)})"
            )
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
                        shapes.issues.append(
                            f"{where}: video {videos} is an empty frame list (crashes lmms-eval's qwen2_5_vl)"
                        )
                    sizes = {s for s in (_size(f) for f in url) if s}
                    if len(sizes) > 1:
                        shapes.issues.append(
                            f"{where}: video {videos} mixes frame sizes {sorted(sizes)} (qwen2_5_vl needs one size per video)"
                        )
                    for s in sizes:
                        shapes.max_size = max(shapes.max_size, s, key=lambda v: v[0] * v[1])
                    if first_video_frames is None:
                        first_video_frames = n
                    elif n < first_video_frames:
                        shapes.issues.append(
                            f"{where}: video {videos} has fewer frames ({n}) than video 1 ({first_video_frames}); "
                            "fine as frame lists, a crash in qwen2_5_vl if these were video files"
                        )
                else:
                    shapes.video_files += 1
    shapes.requests += 1
    shapes.images.append(images)
    shapes.videos.append(videos)
    shapes.frames_per_request.append(frames)
    shapes.text_parts.append(texts)
    visual_positions = [i for i, k in enumerate(kinds) if k == "visual"]
    if len(visual_positions) > 1 and any(k == "text" for k in kinds[visual_positions[0] : visual_positions[-1]]):
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
