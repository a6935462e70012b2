"""Decode-ahead: the generic Prefetcher (same values as serial preparation, memory budget, failures,
no stray threads, off switch) and the lmms-eval hook (the order read from lmms-eval's own chat loop,
identical task outputs, several threads, forked children, progress lines)."""

from __future__ import annotations

import hashlib
import multiprocessing
import pickle
import threading
import time
from typing import Any

import datasets
import numpy as np
import pytest
from lmms_eval.api.instance import Instance
from lmms_eval.api.model import CacheHook
from lmms_eval.models.chat._chat_base import ChatMixin

from lmms_eval_plugins import prefetch
from lmms_eval_plugins.errors import MediaError
from lmms_eval_plugins.prefetch import Prefetcher, prefetched


@pytest.fixture(autouse=True)
def fresh_prefetch(monkeypatch):
    for name in (
        "LMMS_EVAL_PLUGINS_PREFETCH",
        "LMMS_EVAL_PLUGINS_PREFETCH_MB",
        "LMMS_EVAL_PLUGINS_PREFETCH_WORKERS",
        "LMMS_EVAL_PLUGINS_PREFETCH_AHEAD",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    prefetch.shutdown()
    yield
    prefetch.shutdown()


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("lmms-eval-plugins-prefetch")]


def wait_for(condition, timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.005)


# ----------------------------------------------------------------------------------------------- core


class StandInTask:
    """Documents whose preparation is deterministic, with a record of who prepared what."""

    def __init__(self, n: int, delay: float = 0.0, fail: frozenset[int] = frozenset()) -> None:
        self.docs = [{"id": i, "text": f"doc {i}"} for i in range(n)]
        self.delay, self.fail = delay, fail
        self.calls: list[tuple[int, str]] = []
        self.lock = threading.Lock()

    def prepare(self, doc: dict) -> dict:
        with self.lock:
            self.calls.append((doc["id"], threading.current_thread().name))
        time.sleep(self.delay)
        if doc["id"] in self.fail:
            raise MediaError(f"cannot decode doc {doc['id']}", record=str(doc["id"]))
        rng = np.random.default_rng(doc["id"])
        return {"id": doc["id"], "frames": [rng.integers(0, 256, (8, 8, 3), dtype=np.uint8) for _ in range(3)]}


def same_value(a: dict, b: dict) -> bool:
    return a["id"] == b["id"] and all(np.array_equal(x, y) for x, y in zip(a["frames"], b["frames"]))


def test_prefetched_values_equal_serial_preparation_and_come_from_workers():
    task = StandInTask(20, delay=0.002)
    serial = [task.prepare(d) for d in task.docs]
    task.calls.clear()
    pf = Prefetcher(workers=2, ahead=4, budget_mb=100)
    pf.register_docs("t", task.docs, task.prepare)
    got = []
    for i in range(20):
        got.append(pf.get("t", i))
        time.sleep(0.004)  # the model at work
    assert all(same_value(a, b) for a, b in zip(got, serial))
    # Every value a worker prepared was asked for (none wasted), and most requests found theirs ready
    # (timing decides only how many of them: under load a request may come before a worker starts it).
    assert pf.stats.discarded == 0 and pf.stats.ready + pf.stats.waited + pf.stats.inline == 20
    assert pf.stats.ready + pf.stats.waited >= 10
    assert sorted(i for i, _ in task.calls) == list(range(20))  # each document prepared exactly once
    assert all(name.startswith("lmms-eval-plugins-prefetch") for i, name in task.calls if i > 0)
    pf.close()


def test_workers_prepare_the_next_document_while_the_caller_works():
    task = StandInTask(5)
    pf = Prefetcher(workers=1, ahead=2, budget_mb=100)
    pf.register_docs("t", task.docs, task.prepare)
    pf.get("t", 0)
    wait_for(lambda: pf.stats.prepared == 2)  # documents 1 and 2, with nobody asking yet
    assert pf.held_bytes > 0
    assert pf.stats.prepared == 2  # never more than `ahead` past the last one asked for
    assert same_value(pf.get("t", 1), task.prepare(task.docs[1]))
    pf.close()


def test_the_order_can_be_given_and_several_tasks_share_one_plan():
    a, b = StandInTask(3), StandInTask(3)
    pf = Prefetcher(workers=2, ahead=8, budget_mb=100)
    pf.register_docs("a", a.docs, a.prepare)
    pf.register_docs("b", b.docs, b.prepare)
    order = [("b", 2), ("a", 0), ("b", 0), ("a", 2), ("a", 1), ("b", 1)]
    pf.set_plan(order)
    for key, i in order:
        value = pf.get(key, i)
        assert value["id"] == i
        time.sleep(0.01)
    assert pf.stats.discarded == 0 and pf.stats.ready + pf.stats.waited >= 3
    pf.close()


def test_the_memory_budget_bounds_what_is_held_and_prepared():
    task = StandInTask(40, delay=0.001)
    size = 10_000_000
    pf = Prefetcher(workers=4, ahead=100, budget_mb=35, sizer=lambda value: size)
    pf.register_docs("t", task.docs, task.prepare)
    held = []
    for i in range(40):
        pf.get("t", i)
        held.append(pf.held_bytes)
        time.sleep(0.003)
    assert pf.stats.peak_bytes <= 35_000_000
    assert max(held) <= 35_000_000
    assert pf.stats.ready + pf.stats.waited >= 20  # still prefetching, three values at a time
    pf.close()


def test_a_value_larger_than_the_budget_is_still_prepared_one_at_a_time():
    task = StandInTask(10)
    pf = Prefetcher(workers=3, ahead=10, budget_mb=1, sizer=lambda value: 50_000_000)
    pf.register_docs("t", task.docs, task.prepare)
    for i in range(10):
        pf.get("t", i)
        wait_for(lambda: pf.threads == 0 or pf.held_bytes > 0)
        assert pf.held_bytes <= 50_000_000
    assert pf.stats.peak_bytes <= 50_000_000
    assert pf.stats.ready + pf.stats.waited >= 8
    pf.close()


def test_a_failed_preparation_raises_in_the_caller_and_nothing_else_changes():
    task = StandInTask(6, fail=frozenset({3}))
    pf = Prefetcher(workers=2, ahead=6, budget_mb=100)
    pf.register_docs("t", task.docs, task.prepare)
    for i in range(6):
        if i == 3:
            wait_for(lambda: pf.stats.failed == 1)
            with pytest.raises(MediaError, match="cannot decode doc 3"):
                pf.get("t", i)
        else:
            assert pf.get("t", i)["id"] == i
    assert pf.stats.failed == 1
    pf.close()


def test_documents_the_caller_skips_are_dropped():
    task = StandInTask(30)
    pf = Prefetcher(workers=2, ahead=4, budget_mb=100)
    pf.register_docs("t", task.docs, task.prepare)
    pf.get("t", 0)
    wait_for(lambda: pf.stats.prepared >= 4)
    wait_for(lambda: pf.threads == 0)
    assert pf.get("t", 20)["id"] == 20  # 1-19 skipped, e.g. answered from lmms-eval's response cache
    wait_for(lambda: pf.threads == 0)
    assert pf.stats.discarded == 4  # 1-4, prepared for nothing
    assert pf.held_bytes == 4 * 3 * 8 * 8 * 3  # 21-24 only
    pf.close()


def test_no_thread_outlives_the_work_and_close_joins_them():
    task = StandInTask(12, delay=0.01)
    pf = Prefetcher(workers=3, ahead=12, budget_mb=100)
    pf.register_docs("t", task.docs, task.prepare)
    pf.get("t", 0)
    assert prefetch_threads()
    for i in range(1, 12):
        pf.get("t", i)
    wait_for(lambda: not prefetch_threads())  # nothing left to prepare: the workers exited
    pf2 = Prefetcher(workers=3, ahead=12, budget_mb=100)
    slow = StandInTask(12, delay=0.05)
    pf2.register_docs("t", slow.docs, slow.prepare)
    pf2.get("t", 0)
    pf2.close()
    assert not prefetch_threads()


def test_the_off_switch_prepares_everything_inline(monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH", "0")
    assert prefetch.settings()["workers"] == 0
    task = StandInTask(5)
    pf = Prefetcher()
    pf.register_docs("t", task.docs, task.prepare)
    assert [pf.get("t", i)["id"] for i in range(5)] == list(range(5))
    assert pf.stats.inline == 5 and not prefetch_threads()
    assert {name for _, name in task.calls} == {threading.current_thread().name}


def test_settings_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH_MB", "64")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH_WORKERS", "3")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH_AHEAD", "5")
    pf = Prefetcher()
    assert (pf.budget, pf.workers, pf.ahead) == (64_000_000, 3, 5)


def test_estimate_bytes_counts_pil_frames_as_pillow_stores_them():
    from PIL import Image

    from lmms_eval_plugins.media import SampledFrames

    frames = [Image.new("RGB", (10, 5)), Image.new("L", (10, 5))]
    messages = [{"role": "user", "content": [{"type": "video", "url": frames}, {"type": "text", "text": "abc"}]}]
    assert prefetch.estimate_bytes(messages) == 10 * 5 * 4 + 10 * 5 + len("uservideotextabc")
    assert prefetch.estimate_bytes(SampledFrames(frames, [0.0, 1.0], [0, 1], "p", 1.0)) == 250 + 1


# ----------------------------------------------------------------------------------------------- lmms-eval hook


def frames_digest(messages: Any) -> str:
    h = hashlib.sha256()
    for message in messages:
        for part in message["content"]:
            if part["type"] == "text":
                h.update(part["text"].encode())
            else:
                for frame in part["url"] if isinstance(part["url"], list) else [part["url"]]:
                    h.update(frame.mode.encode() + repr(frame.size).encode() + frame.tobytes())
    return h.hexdigest()


class StandInConfig:
    def __init__(self, hook) -> None:
        self.doc_to_messages = hook


class StandInLmmsTask:
    """Like lmms-eval's ConfigurableMessagesTask: the Instance holds the task's method, which calls config's hook."""

    def __init__(self, hook) -> None:
        self.config = StandInConfig(hook)

    def doc_to_messages(self, doc):
        return self.config.doc_to_messages(doc, lmms_eval_specific_kwargs={"pre_prompt": ""})


class ChatModel(ChatMixin):
    """lmms-eval's own chat request loop (Collator order) with a model that only records what it got."""

    def __init__(self, task_dict: dict, latency: float = 0.0) -> None:
        self.task_dict, self.batch_size, self.rank, self.cache_hook = task_dict, 1, 0, CacheHook(None)
        self.latency = latency
        self.seen: list[str] = []

    def _infer_one(self, chat_messages, gen_kwargs) -> str:
        self.seen.append(chat_messages.messages[0].content[0].text)
        time.sleep(self.latency)
        return "ok"


def stand_in_docs(n: int) -> datasets.Dataset:
    return datasets.Dataset.from_list([{"id": i, "text": f"document {i}", "key": (7 * i) % n} for i in range(n)])


def requests_for(dataset, target, task: str = "t", ctx=lambda d: f"prompt {d['key']:03d}") -> list[Instance]:
    return [
        Instance(
            "generate_until",
            (ctx(dataset[i]), target, {"max_new_tokens": 4}, i, task, "test"),
            0,
            {"task": task, "doc_id": i, "repeats": 1},
        )
        for i in range(len(dataset))
    ]


def make_hook(calls: list):
    def doc_to_messages(doc, lmms_eval_specific_kwargs=None):
        calls.append((doc["id"], threading.current_thread().name, lmms_eval_specific_kwargs))
        time.sleep(0.002)
        return [{"role": "user", "content": [{"type": "text", "text": doc["text"]}]}]

    return prefetched(doc_to_messages)


@pytest.mark.parametrize("through_task", [False, True], ids=["hook in the request", "task method in the request"])
def test_the_hook_follows_lmms_eval_chat_loop_order(through_task):
    data = stand_in_docs(24)  # the Collator sorts by context: the order is a permutation of the documents
    calls: list = []
    hook = make_hook(calls)
    target = StandInLmmsTask(hook).doc_to_messages if through_task else hook
    model = ChatModel({"t": {"test": data}}, latency=0.005)
    out = model.generate_until(requests_for(data, target))
    assert out == ["ok"] * 24
    expected_order = sorted(range(24), key=lambda i: f"prompt {(7 * i) % 24:03d}")
    assert model.seen == [f"document {i}" for i in expected_order]
    stats = prefetch.layer_stats()
    # The predicted order was lmms-eval's: nothing prepared was wasted, every request was matched.
    assert stats["planned"] == stats["requests"] == 24 and stats["discarded"] == 0
    assert stats["ready"] + stats["waited"] >= 12
    assert sorted(i for i, _, _ in calls) == list(range(24))  # each prepared once
    if through_task:  # the workers call what the model would: the same keyword arguments
        assert {kw["pre_prompt"] for _, _, kw in calls} == {""}


def test_a_loop_over_the_request_list_is_followed_too():
    data = stand_in_docs(10)
    calls: list = []
    hook = make_hook(calls)

    class PlainModel:
        def __init__(self) -> None:
            self.task_dict = {"t": {"test": data}}

        def generate_until(self, requests):
            out = []
            for request in requests:
                _, doc_to_messages, _, doc_id, task, split = request.args
                out.append(doc_to_messages(self.task_dict[task][split][doc_id]))
                time.sleep(0.005)
            return out

    out = PlainModel().generate_until(requests_for(data, hook))
    assert [m[0]["content"][0]["text"] for m in out] == [f"document {i}" for i in range(10)]
    stats = prefetch.layer_stats()
    assert stats["requests"] == 10 and stats["discarded"] == 0 and stats["ready"] + stats["waited"] >= 5


def test_several_tasks_in_one_loop_and_tasks_that_are_not_ours():
    first, second = stand_in_docs(6), stand_in_docs(5)
    calls: list = []
    hook = make_hook(calls)

    def plain(doc, lmms_eval_specific_kwargs=None):  # another task's hook, not prefetched
        return [{"role": "user", "content": [{"type": "text", "text": "plain " + doc["text"]}]}]

    requests = requests_for(first, hook, "a") + requests_for(second, plain, "b") + requests_for(second, hook, "c")
    model = ChatModel({"a": {"test": first}, "b": {"test": second}, "c": {"test": second}}, latency=0.005)
    model.generate_until(requests)
    assert sorted(model.seen) == sorted(
        [f"document {i}" for i in range(6)]
        + [f"plain document {i}" for i in range(5)]
        + [f"document {i}" for i in range(5)]
    )
    stats = prefetch.layer_stats()
    assert stats["planned"] == stats["requests"] == 11 and stats["discarded"] == 0


def test_outside_a_model_loop_the_hook_is_the_function():
    calls: list = []
    hook = make_hook(calls)
    doc = {"id": 3, "text": "document 3"}
    assert hook(doc) == [{"role": "user", "content": [{"type": "text", "text": "document 3"}]}]
    assert prefetch.layer_stats() is None and not prefetch_threads()


def test_the_hook_looks_like_the_function_to_lmms_eval():
    import inspect

    from lmms_eval_plugins.benchmarks.causalstep import (
        prompts as tasks,
    )  # the plain hooks (tasks.py hands out their prefetched form)

    hook = prefetched(tasks.doc_to_messages)
    assert prefetched(hook) is hook
    assert inspect.signature(hook) == inspect.signature(tasks.doc_to_messages)
    assert hook.__name__ == "doc_to_messages" and "causalstep" in repr(hook)
    again = pickle.loads(pickle.dumps(hook))
    assert isinstance(again, prefetch.PrefetchedHook) and again.__wrapped__ is tasks.doc_to_messages


def test_multi_round_calls_are_never_prepared_ahead():
    calls: list = []

    def doc_to_messages(doc, lmms_eval_specific_kwargs=None, round_idx=None):
        calls.append(round_idx)
        return [{"role": "user", "content": [{"type": "text", "text": f"round {round_idx}"}]}]

    hook = prefetched(doc_to_messages)
    assert hook({"id": 0}, round_idx=2)[0]["content"][0]["text"] == "round 2"
    assert calls == [2] and prefetch.layer_stats() is None


def test_concurrent_callers_from_a_thread_pool_get_their_own_documents():
    # vLLM's chat class calls doc_to_messages from a thread pool, batch after batch.
    from concurrent.futures import ThreadPoolExecutor

    data = stand_in_docs(32)
    calls: list = []
    hook = make_hook(calls)

    class PooledModel:
        def __init__(self) -> None:
            self.task_dict = {"t": {"test": data}}

        def one(self, request):
            _, doc_to_messages, _, doc_id, task, split = request.args
            return doc_to_messages(self.task_dict[task][split][doc_id])

        def generate_until(self, requests):
            out = []
            for start in range(0, len(requests), 4):
                with ThreadPoolExecutor(4) as pool:
                    out.extend(pool.map(self.one, requests[start : start + 4]))
                time.sleep(0.01)
            return out

    out = PooledModel().generate_until(requests_for(data, hook))
    assert [m[0]["content"][0]["text"] for m in out] == [f"document {i}" for i in range(32)]
    assert prefetch.layer_stats()["ready"] + prefetch.layer_stats()["waited"] > 0


def _child_calls_hook(queue) -> None:
    from lmms_eval_plugins import prefetch as pf

    hook = pf.prefetched(lambda doc, lmms_eval_specific_kwargs=None: doc["id"] * 2)
    queue.put((pf._LAYER is None, hook({"id": 21}), len(prefetch_threads())))


def test_a_forked_child_starts_with_a_fresh_prefetcher():
    data = stand_in_docs(40)
    calls: list = []
    hook = make_hook(calls)
    requests = requests_for(data, hook)
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()

    class ForkingModel(ChatModel):
        def _infer_one(self, chat_messages, gen_kwargs):
            if len(self.seen) == 1:  # fork while the workers are busy
                child = ctx.Process(target=_child_calls_hook, args=(queue,))
                child.start()
                child.join(30)
                assert child.exitcode == 0
            return super()._infer_one(chat_messages, gen_kwargs)

    ForkingModel({"t": {"test": data}}, latency=0.002).generate_until(requests)
    assert queue.get(timeout=5) == (True, 42, 0)


def test_a_progress_line_while_preparation_is_the_bottleneck(monkeypatch):
    from loguru import logger

    monkeypatch.setattr(prefetch, "PROGRESS_EVERY_S", 0.0)
    lines: list[str] = []
    sink = logger.add(lambda message: lines.append(str(message)), level="INFO")
    try:
        data = stand_in_docs(6)

        def slow(doc, lmms_eval_specific_kwargs=None):
            time.sleep(0.02)
            return [{"role": "user", "content": [{"type": "text", "text": doc["text"]}]}]

        monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH", "0")  # every request waits for its frames
        ChatModel({"t": {"test": data}}).generate_until(requests_for(data, prefetched(slow)))
    finally:
        logger.remove(sink)
    progress = [line for line in lines if "preparing media:" in line]
    assert any("3/6 requests" in line for line in progress)
    assert any("all 6 requests done" in line for line in progress) or len(progress) >= 5


# ----------------------------------------------------------------------------------------------- real tasks


def run_task(benchmark: str, prefetch_on: bool, monkeypatch) -> tuple[list[str], dict | None]:
    from lmms_eval_plugins.data import to_dataset
    from testkit.task_utils import load_task_utils

    module = load_task_utils(benchmark)
    if benchmark == "causalstep":
        data = module.process_docs(
            [{"benchmark": "causalstep", "source": "sample", "frames_per_segment": 4, "max_long_side": 64}]
        )
    else:
        # three tasks, three row schemas: their Arrow rows in one list
        data = [
            row
            for task in ("CC", "PSS", "MSR")
            for row in to_dataset(
                module.load_docs({"benchmark": "crossvid", "source": "sample", "frames": 8}, task),
                features=module.row_features(task),
            )
        ]
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH", "1" if prefetch_on else "0")
    digests: list[str] = []

    class Recorder(ChatModel):
        def _infer_one(self, chat_messages, gen_kwargs):
            digests.append(frames_digest([m.model_dump() for m in chat_messages.messages]))
            return "A"

    hook = prefetched(module.doc_to_messages)
    requests = requests_for(data, hook, benchmark, ctx=lambda d: module.doc_to_text(d))
    Recorder({benchmark: {"test": data}}).generate_until(requests)
    stats = prefetch.layer_stats()
    prefetch.shutdown()
    return digests, stats


@pytest.mark.parametrize("benchmark", ["causalstep", "crossvid"])
def test_real_tasks_give_the_model_identical_inputs_with_and_without_prefetch(benchmark, monkeypatch):
    serial, off = run_task(benchmark, False, monkeypatch)
    ahead, on = run_task(benchmark, True, monkeypatch)
    assert ahead == serial
    assert off["workers"] == 0 and off["inline"] == off["planned"]
    assert on["requests"] == on["planned"] and on["discarded"] == 0 and on["ready"] + on["waited"] >= on["planned"] // 2


class SimpleModel:
    """The shape of lmms-eval's simple model classes: Collator sorted by context length, doc_to_visual per request."""

    def __init__(self, task_dict: dict) -> None:
        self.task_dict = task_dict
        self.seen: list[str] = []

    def generate_until(self, requests):
        from lmms_eval import utils

        re_ords = utils.Collator(
            [r.args for r in requests], lambda x: (-len(x[0]), x[0]), group_fn=lambda x: x[1], grouping=True
        )
        for chunk in re_ords.get_batched(n=1, batch_fn=None):
            ctx, _, doc_to_visual, doc_id, task, split = chunk[0]
            visuals = doc_to_visual(self.task_dict[task][split][doc_id])
            self.seen.append(hashlib.sha256(b"".join(v.tobytes() for v in visuals) + ctx.encode()).hexdigest())
            time.sleep(0.005)
        return ["A"] * len(requests)


def test_lmms_eval_real_task_objects_are_followed(isolated_env, monkeypatch):
    # The tasks as lmms-eval builds them from our YAML (ConfigurableMessagesTask for chat models,
    # ConfigurableTask for simple ones): their Instances hold the task's bound hook, which calls the
    # config's: the prefetched hook the task folder's utils.py exports.
    from lmms_eval.tasks import TaskManager, get_task_dict

    import lmms_eval_plugins.discovery  # noqa: F401  (registers our task folder)

    manager = TaskManager()
    for task_type, hook, model in (("chat", "doc_to_messages", ChatModel), ("simple", "doc_to_visual", SimpleModel)):
        task = get_task_dict(["causalstep_sample"], manager, task_type)["causalstep_sample"]
        assert isinstance(getattr(task.config, hook), prefetch.PrefetchedHook), task_type
        task.build_all_requests(limit=None, rank=0, world_size=1)
        runs = []
        for on in ("0", "1"):
            monkeypatch.setenv("LMMS_EVAL_PLUGINS_PREFETCH", on)
            prefetch.shutdown()
            runs.append(model({"causalstep_sample": task.dataset}))
            runs[-1].generate_until(task.instances)
        assert runs[0].seen == runs[1].seen and len(runs[1].seen) == len(task.instances)
        stats = prefetch.layer_stats()
        assert stats["planned"] == stats["requests"] == len(task.instances) and stats["discarded"] == 0, task_type
        assert stats["ready"] + stats["waited"] >= len(task.instances) // 2
