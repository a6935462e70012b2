"""What a served model is shown: every frame a video task chose arrives once, in order, in its place.

lmms-eval's API chat classes (``openai``, ``vllm``) build their requests with
``ChatMessages.to_openai_messages``: for a ``{"type": "video", "url": [PIL frames]}`` item it calls
``qwen_vl_utils.fetch_video`` (which resizes the frames and pads an odd count by repeating the last
one), and base64-encodes each frame, a temporary PIL image, through a per-request cache keyed on
``id(image)``. A freed temporary's id is reused by a later frame, which is then sent as the earlier
frame's picture. ``lmms_eval_plugins.compat.fixes`` (installed by our entry point in every
lmms-eval process) fixes both; without it these tests fail.

The sample videos draw their own frame number into every frame (``decode_frame_index``) and each
video has its own bright/dark colours, so every image that arrives can be read back as "frame 14 of
the doc's 2nd video" and compared with the frames in the task's own ``doc_to_messages``.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import io
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from PIL import Image

from lmms_eval_plugins import tasks_dir
from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.task_utils import load_task_utils
from lmms_eval_plugins.synthetic import _cell_bounds, decode_frame_index

sys.path.insert(0, str(Path(__file__).resolve().parent))  # judge_server.py
from judge_server import JudgeServer, Reply

VIDEO_TASKS = {
    **{
        f"crossvid_{code}_sample": "crossvid"
        for code in ("bu", "nc", "cc", "pea", "pi", "fsa", "pss", "msr", "moc", "ccqa")
    },
    "causalstep_sample": "causalstep",
    "virectify_sample": "virectify",
    "virectify_reflect_sample": "virectify",
}
OFFLINE_JUDGE = {"LMMS_EVAL_PLUGINS_JUDGE": "offline"}  # crossvid_ccqa and virectify* are judged
VIDEO_KWARGS = {"nframes": 10}  # what the openai chat class passes (max_frames_num defaults to 10)
REPEATS = 5  # conversions of one doc in test_conversion_is_the_same_every_time
QWEN_FACTOR = 28  # fetch_video resizes to multiples of patch size 14 x merge size 2
COLOUR_TOLERANCE = 6.0  # RGB units; a frame's colours vary by <3 within a video, videos differ by >13


# ------------------------------------------------------------------------------------- reading frames


@dataclass(frozen=True)
class Frame:
    video: int  # 1-based, in order of first appearance in the doc's own messages; 0: no video of the doc
    index: int  # the frame number drawn into the picture

    def name(self, n_videos: int) -> str:
        """ "14" in a one-video doc, "v2:14" otherwise ("v?:14": colours of none of the doc's videos)."""
        if self.video == 1 and n_videos == 1:
            return str(self.index)
        return f"v{self.video or '?'}:{self.index}"


def colours(image: Image.Image) -> tuple[int, np.ndarray]:
    """(frame number, mean RGB of its bright cells then of its dark cells; NaN for a colour it lacks)."""
    index = decode_frame_index(image)
    rgb = np.asarray(image.convert("RGB"), dtype=np.float32)
    height, width, _ = rgb.shape
    bright, dark = [], []
    for bit, (x0, y0, x1, y1) in enumerate(_cell_bounds(width, height)):
        dx, dy = (x1 - x0) // 4, (y1 - y0) // 4  # the middle of each cell, as decode_frame_index reads it
        (bright if index >> bit & 1 else dark).append(rgb[y0 + dy : y1 - dy, x0 + dx : x1 - dx].reshape(-1, 3).mean(0))

    def mean(cells: list[np.ndarray]) -> np.ndarray:
        return np.mean(cells, axis=0) if cells else np.full(3, np.nan)

    return index, np.concatenate([mean(bright), mean(dark)])


def colour_distance(a: np.ndarray, b: np.ndarray) -> float:
    both = ~(np.isnan(a) | np.isnan(b))
    return float(np.abs(a[both] - b[both]).max()) if both.any() else float("inf")


class Palettes:
    """The colours of the videos of one doc, learned from the frames the task put in its messages."""

    def __init__(self) -> None:
        self.videos: list[np.ndarray] = []

    def _near(self, measured: np.ndarray) -> list[int]:
        return [v for v, known in enumerate(self.videos, 1) if colour_distance(measured, known) <= COLOUR_TOLERANCE]

    def learn(self, image: Image.Image) -> Frame:
        index, measured = colours(image)
        near = self._near(measured)
        assert len(near) <= 1, f"frame {index} matches the colours of videos {near}: the test cannot tell them apart"
        if not near:
            self.videos.append(measured)
            return Frame(len(self.videos), index)
        known = self.videos[near[0] - 1]
        known[np.isnan(known)] = measured[np.isnan(known)]  # a frame lacking bright (or dark) cells
        return Frame(near[0], index)

    def identify(self, image: Image.Image) -> Frame:
        index, measured = colours(image)
        near = self._near(measured)
        return Frame(near[0] if len(near) == 1 else 0, index)


def decode_data_url(url: str) -> Image.Image:
    assert url.startswith("data:image/"), url[:40]
    image = Image.open(io.BytesIO(base64.b64decode(url.split(",", 1)[1])))
    image.load()
    return image


# --------------------------------------------------------------------------------- layouts to compare


@dataclass(frozen=True)
class Group:
    """The frames between two text items (a video item, or consecutive image items)."""

    label: str  # the last line of the text before it: "Segment 3:", "Video 2:", "[4.5s]"
    frames: tuple[Frame, ...]
    sizes: tuple[tuple[int, int], ...]
    is_video: bool  # the task's group is a video item (resized by fetch_video), not image items


Layout = tuple[Any, ...]  # per message: (role, entries), each entry a text (str) or a Group


def _label(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip()[-40:] if lines else "(start)"


def _append_frames(entries: list, frames: list[Frame], sizes: list[tuple[int, int]], is_video: bool) -> None:
    last = entries[-1] if entries else None
    if isinstance(last, Group):  # no text in between: one group, as the model sees it
        entries[-1] = Group(last.label, last.frames + tuple(frames), last.sizes + tuple(sizes), last.is_video)
    else:
        entries.append(Group(_label(last or ""), tuple(frames), tuple(sizes), is_video))


def intended_layout(messages: list[dict[str, Any]], palettes: Palettes) -> Layout:
    """The task's own messages, each frame read back from its picture."""
    layout = []
    for message in messages:
        entries: list = []
        for item in message["content"]:
            if item["type"] == "text":
                entries.append(item["text"])
            elif item["type"] in ("video", "image"):
                images = item["url"] if item["type"] == "video" else [item["url"]]
                assert all(isinstance(i, Image.Image) for i in images), f"expected PIL frames in {item['type']} items"
                _append_frames(
                    entries, [palettes.learn(i) for i in images], [i.size for i in images], item["type"] == "video"
                )
            else:
                raise AssertionError(f"unexpected content item {item['type']!r}")
        layout.append((message["role"], tuple(entries)))
    return tuple(layout)


def served_layout(openai_messages: list[dict[str, Any]], palettes: Palettes) -> Layout:
    """What was sent, in the same form, each image read back and assigned to one of the doc's videos."""
    layout = []
    for message in openai_messages:
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) else content
        entries: list = []
        for item in content:
            if item["type"] == "text":
                entries.append(item["text"])
            else:
                assert item["type"] == "image_url", f"unexpected content item {item['type']!r}"
                image = decode_data_url(item["image_url"]["url"])
                _append_frames(entries, [palettes.identify(image)], [image.size], is_video=False)
        layout.append((message["role"], tuple(entries)))
    return tuple(layout)


def text_key(layout: Layout) -> tuple[tuple[str, str], ...]:
    """A doc's (role, text) items in order: how a recorded request is matched to its doc."""
    return tuple((role, e) for role, entries in layout for e in entries if isinstance(e, str))


def _names(frames: tuple[Frame, ...], n_videos: int) -> str:
    return "[" + ", ".join(f.name(n_videos) for f in frames) + "]"


def differences(intended: Layout, served: Layout, n_videos: int) -> list[str]:
    """Readable differences: "Segment 3: sent [32, 40, 43, 46] for [37, 40, 43, 46]"."""
    if text_key(intended) != text_key(served):
        return ["the text items differ"]
    problems = []
    for (_, want_entries), (_, got_entries) in zip(intended, served):
        want_groups = [e for e in want_entries if isinstance(e, Group)]
        got_groups = [e for e in got_entries if isinstance(e, Group)]
        if len(want_groups) != len(got_groups):
            problems.append(f"{len(got_groups)} frame groups sent for {len(want_groups)}")
            continue
        for want, got in zip(want_groups, got_groups):
            if got.frames != want.frames:
                padded = len(got.frames) > len(want.frames) and got.frames[: len(want.frames)] == want.frames
                why = (
                    " (padded: the last frame repeated)"
                    if padded and set(got.frames[len(want.frames) :]) == {want.frames[-1]}
                    else ""
                )
                problems.append(
                    f"{want.label} sent {_names(got.frames, n_videos)} for {_names(want.frames, n_videos)}{why}"
                )
    return problems


def size_problems(intended: Layout, served: Layout) -> list[str]:
    """Image items arrive as they were; a video's frames arrive at one size, in multiples of 28."""
    problems = []
    for (_, want_entries), (_, got_entries) in zip(intended, served):
        for want, got in zip(
            [e for e in want_entries if isinstance(e, Group)], [e for e in got_entries if isinstance(e, Group)]
        ):
            if not want.is_video:
                if got.sizes != want.sizes:
                    problems.append(
                        f"{want.label}: image sizes {sorted(set(got.sizes))} arrived for {sorted(set(want.sizes))}"
                    )
            elif len(set(got.sizes)) != 1 or any(side % QWEN_FACTOR for side in got.sizes[0]):
                problems.append(
                    f"{want.label}: video frames arrived at {sorted(set(got.sizes))} (from {sorted(set(want.sizes))})"
                )
    return problems


def size_summary(pairs: list[tuple[Layout, Layout]]) -> str:
    """ "96x72 -> 392x280 (x40)": the task's frame sizes and what arrived, over a task's docs."""
    counts: Counter = Counter()
    for intended, served in pairs:
        for (_, want_entries), (_, got_entries) in zip(intended, served):
            for want, got in zip(
                [e for e in want_entries if isinstance(e, Group)], [e for e in got_entries if isinstance(e, Group)]
            ):
                for w, g in zip(want.sizes, got.sizes):
                    counts[f"{w[0]}x{w[1]} -> {g[0]}x{g[1]}"] += 1
    return ", ".join(f"{k} (x{n})" for k, n in counts.most_common())


# ------------------------------------------------------------------------------------ the tasks' docs


class _TaskLoader(yaml.SafeLoader):
    pass


_TaskLoader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))


def task_config(benchmark: str, file_name: str) -> dict[str, Any]:
    """A task YAML with its ``include`` merged in (``!function utils.x`` kept as the string)."""
    config = yaml.load((tasks_dir() / benchmark / file_name).read_text(encoding="utf-8"), Loader=_TaskLoader)
    base = task_config(benchmark, config.pop("include")) if "include" in config else {}
    return {**base, **config}


@cache
def task_docs(task: str) -> tuple[dict[str, Any], ...]:
    """The docs lmms-eval runs: the task's source file through its ``process_docs``."""
    benchmark = VIDEO_TASKS[task]
    config = task_config(benchmark, f"{task}.yaml")
    source = tasks_dir() / benchmark / config["dataset_kwargs"]["data_files"][config["test_split"]]
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    process_docs = getattr(load_task_utils(benchmark), config["process_docs"].removeprefix("utils."))
    return tuple(dict(doc) for doc in process_docs(rows))


def doc_to_messages(task: str, doc: dict[str, Any]) -> list[dict[str, Any]]:
    return load_task_utils(VIDEO_TASKS[task]).doc_to_messages(doc)


@dataclass
class IntendedDoc:
    task: str
    number: int  # position in the task's docs (lmms-eval's doc_id)
    layout: Layout
    palettes: Palettes


@cache
def intended_docs(task: str) -> list[tuple[IntendedDoc, list[dict[str, Any]]]]:
    """Every doc of a task with its own messages, each frame read back (shared by the tests, read only)."""
    out = []
    for number, doc in enumerate(task_docs(task)):
        messages = doc_to_messages(task, doc)
        palettes = Palettes()
        out.append((IntendedDoc(task, number, intended_layout(messages, palettes), palettes), messages))
    return out


def describe(doc: IntendedDoc, problems: list[str]) -> str:
    return f"{doc.task} doc {doc.number}: " + "; ".join(problems)


# ------------------------------------------------------------------------------- in process (fast)


@pytest.fixture(scope="module")
def fixed_lmms_eval():
    """What our lmms_eval.models entry point does in every lmms-eval process."""
    from lmms_eval_plugins.compat import fixes

    assert fixes.install(), "compat.fixes.install(): a frame entry's compatibility check failed (see the warning)"


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Exactly what the openai (and vllm) chat class does to build a request."""
    from lmms_eval.protocol import ChatMessages

    return ChatMessages(messages=messages).to_openai_messages(video_kwargs=VIDEO_KWARGS)


def pictures(messages: list[dict[str, Any]]) -> tuple:
    """A doc's pictures as the conversion sees them: its video and image items, text left out."""
    items = [item for message in messages for item in message["content"] if item["type"] in ("video", "image")]
    return tuple(
        (
            item["type"],
            tuple(
                hashlib.blake2b(image.tobytes(), digest_size=8).digest()
                for image in (item["url"] if item["type"] == "video" else [item["url"]])
            ),
        )
        for item in items
    )


@pytest.mark.parametrize("task", VIDEO_TASKS)
def test_converted_messages_carry_the_task_frames(task, fixed_lmms_eval):
    docs = intended_docs(task)
    assert docs, f"{task} has no docs"
    # Converting a frame costs ~20-40 ms (fetch_video upsizes it, then PNG): docs whose pictures are an
    # earlier doc's (CausalStep asks several questions about one segment) are converted once.
    distinct: dict[tuple, tuple[IntendedDoc, list]] = {}
    for doc, messages in docs:
        distinct.setdefault(pictures(messages), (doc, messages))
    problems, pairs = [], []
    started = time.process_time()
    for doc, messages in distinct.values():
        served = served_layout(to_openai_messages(messages), doc.palettes)
        pairs.append((doc.layout, served))
        found = differences(doc.layout, served, len(doc.palettes.videos)) + size_problems(doc.layout, served)
        if found:
            problems.append(describe(doc, found))
    seconds = time.process_time() - started
    assert not problems, (
        f"{len(problems)} of {len(distinct)} distinct docs converted wrong ({seconds:.1f}s CPU); "
        f"sizes {size_summary(pairs)}:\n" + "\n".join(problems[:40])
    )


# The id reuse depends on the allocator: the same doc, converted again after a gc, must come out the
# same. Four videos of four frames: a frame swapped between videos shows.
REPEATED_DOCS = [("crossvid_nc_sample", 0)]


@pytest.mark.parametrize(("task", "number"), REPEATED_DOCS)
def test_conversion_is_the_same_every_time(task, number, fixed_lmms_eval):
    doc, messages = intended_docs(task)[number]
    problems, first = [], None
    for repeat in range(REPEATS):
        gc.collect()  # frees earlier temporaries, so that their ids are there to be reused
        sent = to_openai_messages(messages)
        served = served_layout(sent, doc.palettes)
        found = differences(doc.layout, served, len(doc.palettes.videos))
        if found:
            problems.append(f"pass {repeat + 1}: " + "; ".join(found))
        urls = [
            item["image_url"]["url"] for message in sent for item in message["content"] if item["type"] == "image_url"
        ]
        first = first or urls
        if urls != first:
            problems.append(f"pass {repeat + 1}: other bytes than pass 1")
    assert not problems, f"{task} doc {number}:\n" + "\n".join(problems)


# ---------------------------------------------------------------------- the real CLI against a server


@dataclass
class ServedRun:
    run: Any  # RunResult
    requests: list[dict[str, Any]]  # every request body the server received, in arrival order
    docs: dict[str, list[tuple[IntendedDoc, list]]]  # task -> its intended docs


@pytest.fixture(scope="session")
def served_run(tmp_path_factory) -> ServedRun:
    """ONE lmms-eval run of every video sample task through the openai chat class, against a loopback server."""
    tmp = tmp_path_factory.mktemp("served-frames")
    env = {
        **OFFLINE_JUDGE,  # private caches, as the isolated_env fixture sets them
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / "cache" / "judge.sqlite3"),
        "HF_DATASETS_CACHE": str(tmp / "hf-datasets"),
    }
    with pytest.MonkeyPatch.context() as mp, JudgeServer(lambda request: Reply(content="A"), lifetime=1800) as server:
        mp.delenv("LMMS_EVAL_PLUGINS_DATA_ROOT", raising=False)
        mp.delenv("LMMS_IMAGE_ENCODE_FORMAT", raising=False)  # PNG, lmms-eval's default
        model_args = (
            f"model_version=test-model,base_url={server.base_url},api_key=k,max_retries=1,"
            "httpx_trust_env=False"
        )  # no proxy between us and 127.0.0.1
        run = run_lmms_eval(
            tasks=list(VIDEO_TASKS),
            model="openai",
            model_args=model_args,
            output_dir=tmp / "out",
            env=env,
            log_samples=False,
            timeout=1200,
        )
        requests = list(server.requests)
    return ServedRun(run, requests, {task: intended_docs(task) for task in VIDEO_TASKS})


def request_layout(body: dict[str, Any]) -> tuple[tuple[tuple[str, str], ...], list[dict[str, Any]]]:
    messages = body.get("messages") or []
    texts = []
    for message in messages:
        content = message["content"]
        for item in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if item["type"] == "text":
                texts.append((message["role"], item["text"]))
    return tuple(texts), messages


@pytest.fixture(scope="session")
def requests_by_text(served_run) -> dict[tuple, list[list[dict[str, Any]]]]:
    by_text: dict[tuple, list] = {}
    for body in served_run.requests:
        key, messages = request_layout(body)
        by_text.setdefault(key, []).append(messages)
    return by_text


@pytest.mark.cli
def test_cli_run_completes_every_video_task(served_run):
    run = served_run.run
    missing = [task for task in VIDEO_TASKS if task not in run.results.get("results", {})]
    assert run.returncode == 0 and not missing, f"exit {run.returncode}, no results for {missing}:\n{run.tail()}"


@pytest.mark.cli
def test_cli_sends_one_request_per_doc(served_run, requests_by_text):
    # every doc's text is unique, so that a request can be matched to its doc by its text
    keys = Counter(text_key(doc.layout) for docs in served_run.docs.values() for doc, _ in docs)
    assert max(keys.values()) == 1, "two docs have the same text; requests cannot be matched to docs"
    unmatched = [key for key in requests_by_text if key not in keys]
    assert not unmatched, f"{len(unmatched)} requests match no doc, e.g. {str(unmatched[0])[:300]}"
    repeated = {str(key)[:120]: len(bodies) for key, bodies in requests_by_text.items() if len(bodies) > 1}
    assert not repeated, f"docs asked more than once: {repeated}"
    assert len(served_run.requests) == sum(keys.values()), (len(served_run.requests), sum(keys.values()))


@pytest.mark.cli
@pytest.mark.parametrize("task", VIDEO_TASKS)
def test_cli_served_frames(task, served_run, requests_by_text):
    docs = served_run.docs[task]
    problems, pairs, checked = [], [], 0
    for doc, _ in docs:
        bodies = requests_by_text.get(text_key(doc.layout), [])
        if len(bodies) != 1:
            problems.append(describe(doc, [f"{len(bodies)} requests received"]))
            continue
        served = served_layout(bodies[0], doc.palettes)
        pairs.append((doc.layout, served))
        found = differences(doc.layout, served, len(doc.palettes.videos)) + size_problems(doc.layout, served)
        if found:
            problems.append(describe(doc, found))
        checked += 1
    assert not problems, f"{len(problems)} of {len(docs)} requests wrong; sizes {size_summary(pairs)}:\n" + "\n".join(
        problems[:40]
    )
    assert checked == len(docs) > 0
