"""``check-model``: what an API model class actually sent (the recording proxy's plan, the summary of
what it recorded, and its comparison with what each doc intended; see :mod:`lmms_eval_plugins.check_model`).
"""

from __future__ import annotations

import collections
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lmms_eval_plugins.check_model_tasks import DocIntent
from lmms_eval_plugins.safe_text import redact_model_args

# ------------------------------------------------------------------------------------------------ what was sent

# Model classes that, without ``base_url`` in --model_args, read ``OPENAI_API_BASE`` (then the OpenAI
# client's ``OPENAI_BASE_URL``, then api.openai.com); names as lmms-eval 0.7.3 registers them.
OPENAI_API_BASE_MODELS = frozenset(
    {
        "openai",
        "openai_compatible",
        "openai_compatible_chat",
        "async_openai",
        "async_openai_compatible_chat",
        "async_openai_compatible",
    }
)
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

    trust_env = (model_arg(model_args, "httpx_trust_env") or "true").strip().lower() not in ("0", "false", "no", "off")
    if _truthy(model_arg(model_args, "azure_openai")):
        return ObservePlan(
            reason="not observable: azure_openai=True reads AZURE_OPENAI_API_BASE, which check-model does not proxy"
        )
    base_url = model_arg(model_args, "base_url")
    if base_url:
        return ObservePlan(unquote(base_url).rstrip("/"), "base_url", trust_env=trust_env)
    if model in OPENAI_API_BASE_MODELS or (model in LITELLM_MODELS and env.get("OPENAI_API_BASE")):
        upstream = env.get("OPENAI_API_BASE") or (
            env.get("OPENAI_BASE_URL") if model in OPENAI_API_BASE_MODELS else None
        )
        return ObservePlan(
            unquote(upstream or DEFAULT_OPENAI_BASE_URL).rstrip("/"), "OPENAI_API_BASE", trust_env=trust_env
        )
    if model in LITELLM_MODELS:
        return ObservePlan(
            reason="not observable: litellm without base_url (or OPENAI_API_BASE) routes per provider; "
            "give base_url= to observe what it sends"
        )
    return ObservePlan(
        reason="not observable: a local model class (check-model sees only what API classes send, "
        "through base_url or OPENAI_API_BASE)"
    )


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
                diffs.append(
                    f"{len(want)} visuals without text between them: {n} images/frames intended, {len(got)} sent"
                )
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
            frames_per_video += [
                n for n, want in zip(runs, intent.runs) if any(k in ("video", "video_file") for k, _ in want)
            ]
        if intent.index in compared:
            continue  # the same doc sent again with a different body: compare the first
        compared.add(intent.index)
        for diff in compare_runs(intent, items):
            differences.setdefault(diff, []).append(intent.index)
    notes = [
        f"{diff} (doc{'s' if len(set(docs)) > 1 else ''} {', '.join(map(str, sorted(set(docs))))})"
        for diff, docs in differences.items()
    ]
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


def attribute_records(
    records: Sequence[Any], intents_by_task: Mapping[str, Sequence[DocIntent]]
) -> dict[str | None, list[Any]]:
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
