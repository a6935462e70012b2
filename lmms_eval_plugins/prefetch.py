"""Decode ahead: prepare the inputs of the next requests while the model works on the current one.

lmms-eval's chat model classes call the task's ``doc_to_messages(doc)`` inside their request loop,
one request after another, so every second spent decoding frames is a second the GPU (or the API)
waits. Two layers here:

- :class:`Prefetcher`, generic and benchmark-agnostic: documents are registered per task with the
  function that prepares them (``register_docs``), an order is given (``set_plan``; default: the
  registration order), and ``get(task_key, index)`` returns the prepared value, waiting for it if a
  worker is on it, or preparing it inline if nobody is. A bounded pool of threads prepares the
  documents that follow the last one asked for, at most ``ahead`` of them and within a memory budget
  (the estimated size of the prepared values held or in preparation). Values are handed over once
  and never shared, and they come from the same function on the same document, so results do not
  change. Workers exit as soon as there is nothing they may do (no thread outlives the work), and
  ``close`` (also run at exit) joins them.
- :func:`prefetched`, for lmms-eval: it wraps a task's ``doc_to_messages`` (or ``doc_to_visual``)
  hook. A call finds the model's request loop on the call stack (a few microseconds) and, the first
  time for that loop, reads the order in which lmms-eval will ask for the documents: the
  ``Collator`` order of the Hugging Face chat and simple classes (grouped by generation arguments,
  sorted by context), the dispatch order of the ``openai`` class, else the order of the request
  list (lmms-eval's dataset order for this rank). Each call is matched to its place in that order by
  comparing the document; a call that matches nothing is simply prepared inline. Without a model
  loop on the stack (a script calling the hook), or when lmms-eval's loop no longer looks as
  expected (the stack walk is the compatibility entry ``request-loop``,
  :mod:`lmms_eval_plugins.compat.frames`), nothing is prefetched.

One prefetcher per process (lmms-eval's ranks are processes, each with its own shard and its own
order); a forked child starts a fresh one. The hook is thread-safe (vLLM's class calls it from a
thread pool).

Settings: ``LMMS_EVAL_PLUGINS_PREFETCH=0`` switches decode-ahead off (everything is prepared
inline, as without the plugin); ``LMMS_EVAL_PLUGINS_PREFETCH_MB`` (default 1024) bounds the memory
of prepared inputs waiting for the model (at least one request is always allowed, however large);
``LMMS_EVAL_PLUGINS_PREFETCH_WORKERS`` (default 2) and ``LMMS_EVAL_PLUGINS_PREFETCH_AHEAD``
(default 16 requests) bound the pool. While preparation is the bottleneck, a progress line is
logged every 30 s.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import os
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from PIL import Image

from lmms_eval_plugins.compat import frames
from lmms_eval_plugins.settings import BadSetting, env_number, switched_off

PREFETCH_ENV = "LMMS_EVAL_PLUGINS_PREFETCH"
PREFETCH_MB_ENV = "LMMS_EVAL_PLUGINS_PREFETCH_MB"
PREFETCH_WORKERS_ENV = "LMMS_EVAL_PLUGINS_PREFETCH_WORKERS"
PREFETCH_AHEAD_ENV = "LMMS_EVAL_PLUGINS_PREFETCH_AHEAD"
DEFAULT_MB = 1024
DEFAULT_WORKERS = 2  # one keeps up whenever preparing a request is faster than answering it; two absorb slow ones
DEFAULT_AHEAD = 16
PROGRESS_EVERY_S = 30.0
PROGRESS_MIN_WAIT_SHARE = 0.2  # log only while the model spends at least this share of its time waiting
JOIN_TIMEOUT_S = 10.0

Job = tuple[Hashable, int]
_TLS = threading.local()  # .in_worker: this thread is a prefetch worker, so hooks run their function directly


def _logger():
    from loguru import logger

    return logger


# ----------------------------------------------------------------------------------------------- settings


def _env_number(name: str, default: float, minimum: float) -> float:
    try:
        return env_number(name, default, minimum=minimum, clamp=True)
    except BadSetting as exc:
        _logger().warning(f"{exc}; using {default}")
        return default


def enabled() -> bool:
    return not switched_off(PREFETCH_ENV)


def settings() -> dict[str, int]:
    """budget_mb, workers and ahead from the environment (workers is 0 when decode-ahead is off)."""
    return {
        "budget_mb": int(_env_number(PREFETCH_MB_ENV, DEFAULT_MB, 0)),
        "workers": int(_env_number(PREFETCH_WORKERS_ENV, DEFAULT_WORKERS, 0)) if enabled() else 0,
        "ahead": int(_env_number(PREFETCH_AHEAD_ENV, DEFAULT_AHEAD, 1)),
    }


# ----------------------------------------------------------------------------------------------- sizes

_BYTES_PER_PIXEL = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16B": 2, "I;16L": 2, "LA": 4, "La": 4, "PA": 4}


def estimate_bytes(value: Any, _depth: int = 0) -> int:
    """Memory held by a prepared value: PIL images (4 bytes a pixel for RGB, as Pillow stores them),
    arrays, strings, and the containers and dataclasses around them."""
    if isinstance(value, Image.Image):
        return value.width * value.height * _BYTES_PER_PIXEL.get(value.mode, 4)
    if isinstance(value, np.ndarray):
        return int(value.nbytes)
    if isinstance(value, (str, bytes, bytearray)):
        return len(value)
    if _depth > 12:
        return 0
    if isinstance(value, Mapping):
        return sum(estimate_bytes(v, _depth + 1) for v in value.values())
    if isinstance(value, (list, tuple, set, frozenset)):
        return sum(estimate_bytes(v, _depth + 1) for v in value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return sum(estimate_bytes(getattr(value, f.name), _depth + 1) for f in dataclasses.fields(value))
    return 0


# ----------------------------------------------------------------------------------------------- core


def _prepare_one(prepare: Callable[[Any], Any], docs: Sequence[Any], index: int) -> Any:
    return prepare(docs[index])


@dataclass
class PrefetchStats:
    requests: int = 0  # get() calls
    ready: int = 0  # ... whose value was prepared and waiting
    waited: int = 0  # ... whose value was being prepared (the caller waited for the rest)
    inline: int = 0  # ... prepared by the caller (not planned, not reached, or the worker failed)
    prepared: int = 0  # values workers finished
    failed: int = 0  # worker preparations that raised (the caller then prepares inline: same error)
    discarded: int = 0  # prepared values nobody asked for (skipped, or the plan changed)
    wait_s: float = 0.0  # time spent inside get()
    peak_bytes: int = 0  # high-water mark of held + in-preparation bytes (estimated)


class _Slot:
    __slots__ = ("abandoned", "claimed", "done", "est", "size", "state", "value")

    def __init__(self, est: int) -> None:
        self.est = est
        self.value: Any = None
        self.size = 0
        self.state = "running"  # running | ready | failed
        self.claimed = False  # a caller took it (maybe still running): its bytes are not held here
        self.abandoned = False  # nobody will ask: drop the value when it arrives
        self.done = threading.Event()


class Prefetcher:
    """Prepare registered documents ahead of the caller, in plan order, within a memory budget."""

    def __init__(
        self,
        *,
        budget_mb: float | None = None,
        workers: int | None = None,
        ahead: int | None = None,
        sizer: Callable[[Any], int] = estimate_bytes,
    ) -> None:
        env = settings()
        self.budget = int((env["budget_mb"] if budget_mb is None else budget_mb) * 1_000_000)
        self.workers = env["workers"] if workers is None else workers
        self.ahead = max(1, env["ahead"] if ahead is None else ahead)
        self._sizer = sizer
        self._lock = threading.Lock()
        self._tasks: dict[Hashable, tuple[Sequence[Any], Callable[[Any], Any]]] = {}
        self._plan: list[Job] = []
        self._positions: dict[Job, list[int]] = {}
        self._explicit = False
        self._cursor = 0  # positions below were asked for or passed over
        self._next = 0  # the next position a worker may take
        self._taken: set[int] = set()  # positions asked for, near the cursor (a job may be listed twice)
        self._slots: dict[int, _Slot] = {}
        self._held = 0
        self._inflight = 0
        self._est: dict[Hashable, int] = {}  # largest value seen per task: the estimate for the next
        self._probing: set[Hashable] = set()  # tasks whose first value (of unknown size) is being prepared
        self._threads: set[threading.Thread] = set()
        self._closed = False
        self._generation = 0
        self.stats = PrefetchStats()

    # -- registration and order

    def register_docs(self, task_key: Hashable, docs: Sequence[Any], prepare_fn: Callable[[Any], Any]) -> None:
        """Documents of one task and the function that prepares one. Without ``set_plan`` the order
        is the registration order of the tasks, each task in document order."""
        with self._lock:
            self._tasks[task_key] = (docs, prepare_fn)
            if not self._explicit:
                self._set_plan([(key, i) for key, (d, _) in self._tasks.items() for i in range(len(d))])

    def set_plan(self, jobs: Iterable[Job]) -> None:
        """The order in which ``get`` will be called: (task_key, index) pairs."""
        with self._lock:
            self._explicit = True
            self._set_plan(list(jobs))

    def _set_plan(self, plan: list[Job]) -> None:
        for slot in self._slots.values():
            self._drop(slot)
        self._slots.clear()
        self._generation += 1
        self._plan = plan
        self._positions = {}
        for pos, job in enumerate(plan):
            self._positions.setdefault(job, []).append(pos)
        self._cursor = self._next = 0
        self._taken.clear()

    def near(self, n: int) -> list[Job]:
        """The jobs most likely asked for next: the n after the cursor, then up to n before it not yet asked."""
        with self._lock:
            after = self._plan[self._cursor : self._cursor + n]
            before = [
                self._plan[p]
                for p in range(self._cursor - 1, max(-1, self._cursor - 1 - n), -1)
                if p not in self._taken
            ]
            return after + before

    # -- the caller

    def get(self, task_key: Hashable, index: int, compute: Callable[[], Any] | None = None) -> Any:
        """The prepared value of document ``index`` of ``task_key``; prepared inline (by ``compute``
        if given, else by the registered function) when no worker has it."""
        start = time.perf_counter()
        slot = None
        with self._lock:
            pos = self._find((task_key, index))
            if pos is not None:
                slot = self._slots.pop(pos, None)
                if slot is not None:
                    slot.claimed = True
                    if slot.state == "ready":
                        self._held -= slot.size
                self._advance(pos)
                # Preparing inline, the caller needs a core: keep one worker back until it is done.
                self._kick(self.workers - (slot is None))
            self.stats.requests += 1
        value, have = None, False
        if slot is not None:
            waited = slot.state == "running"
            slot.done.wait()
            if slot.state == "ready":
                value, have, slot.value = slot.value, True, None
                with self._lock:
                    if waited:
                        self.stats.waited += 1
                    else:
                        self.stats.ready += 1
        if not have:
            if compute is None:
                docs, prepare = self._tasks[task_key]
                value = prepare(docs[index])
            else:
                value = compute()
            with self._lock:
                self.stats.inline += 1
                self._kick()
        with self._lock:
            self.stats.wait_s += time.perf_counter() - start
        return value

    def _find(self, job: Job) -> int | None:
        positions = self._positions.get(job)
        if not positions:
            return None
        lowest = max(0, self._cursor - self.ahead)  # a little behind: concurrent callers arrive out of order
        for pos in positions[bisect_left(positions, lowest) :]:
            if pos not in self._taken:
                return pos
        return None

    def _advance(self, pos: int) -> None:
        self._taken.add(pos)
        self._cursor = max(self._cursor, pos + 1)
        self._next = max(self._next, self._cursor)
        floor = self._cursor - self.ahead
        for old in [p for p in self._slots if p < floor]:  # passed over: nobody will ask
            self._drop(self._slots.pop(old))
        self._taken = {p for p in self._taken if p >= floor}

    def _drop(self, slot: _Slot) -> None:
        if slot.state == "ready":
            self._held -= slot.size
            slot.value = None
            self.stats.discarded += 1
        slot.abandoned = True

    # -- the pool

    def _pick(self) -> tuple[int, int] | None:
        """The next position a worker may prepare and its size estimate, or None (nothing, or no room)."""
        while self._next < len(self._plan) and self._next < self._cursor + self.ahead:
            pos = self._next
            if pos in self._slots or pos in self._taken:
                self._next += 1
                continue
            task_key = self._plan[pos][0]
            known = task_key in self._est
            if not known and task_key in self._probing:
                return None  # a task's first value teaches its size: no second one before it is known
            # An unknown size is guessed as the largest seen so far (0 at the very start).
            est = self._est[task_key] if known else max(self._est.values(), default=0)
            if (self._held or self._inflight) and self._held + self._inflight + est > self.budget:
                return None
            if not known:
                self._probing.add(task_key)
            self._next += 1
            return pos, est
        return None

    def _kick(self, workers: int | None = None) -> None:
        """Start workers (up to ``workers``, default all) while there are positions they may take."""
        limit = self.workers if workers is None else min(workers, self.workers)
        if self._closed or limit <= 0:
            return
        waiting = min(len(self._plan), self._cursor + self.ahead) - self._next
        for _ in range(min(limit - len(self._threads), waiting)):
            thread = threading.Thread(
                target=self._work, name=f"lmms-eval-plugins-prefetch-{len(self._threads)}", daemon=True
            )
            self._threads.add(thread)
            thread.start()

    def _work(self) -> None:
        me = threading.current_thread()
        try:
            while True:
                with self._lock:
                    picked = None if self._closed else self._pick()
                    if picked is None:
                        return
                    pos, est = picked
                    task_key, index = self._plan[pos]
                    docs, prepare = self._tasks[task_key]
                    slot, generation = _Slot(est), self._generation
                    self._slots[pos] = slot
                    self._inflight += est
                    self.stats.peak_bytes = max(self.stats.peak_bytes, self._held + self._inflight)
                self._run(slot, generation, task_key, functools.partial(_prepare_one, prepare, docs, index))
        finally:
            with self._lock:
                self._threads.discard(me)

    def _run(self, slot: _Slot, generation: int, task_key: Hashable, prepare: Callable[[], Any]) -> None:
        _TLS.in_worker = True
        try:
            value, ok = prepare(), True
        except BaseException as exc:  # the caller prepares it again inline and gets the error there
            value, ok = None, False
            _logger().debug(f"prefetch of {task_key!r} failed ({type(exc).__name__}: {exc}); prepared inline instead")
        finally:
            _TLS.in_worker = False
        try:
            size = self._sizer(value) if ok else 0
        except Exception:
            size = slot.est
        with self._lock:
            self._inflight -= slot.est
            self._probing.discard(task_key)
            if not ok:
                slot.state = "failed"
                self.stats.failed += 1
            else:
                self._est[task_key] = max(self._est.get(task_key, 0), size)
                self.stats.prepared += 1
                if slot.claimed:  # its caller is waiting: hand it over whatever happened since
                    slot.value, slot.size, slot.state = value, size, "ready"
                elif slot.abandoned or generation != self._generation or self._closed:
                    slot.state = "failed"
                    self.stats.discarded += 1
                else:
                    slot.value, slot.size, slot.state = value, size, "ready"
                    self._held += size
                    self.stats.peak_bytes = max(self.stats.peak_bytes, self._held + self._inflight)
            slot.done.set()

    @property
    def held_bytes(self) -> int:
        return self._held

    def close(self, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Stop the workers (each finishes the value in hand), join them and drop what was prepared."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
            for slot in self._slots.values():
                self._drop(slot)
            self._slots.clear()
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)

    @property
    def threads(self) -> int:
        return len(self._threads)


# ----------------------------------------------------------------------------------------------- lmms-eval hook


class PrefetchedHook:
    """A task hook (``doc_to_messages``/``doc_to_visual``) whose values are prepared ahead.

    Looks like the wrapped function to lmms-eval (``inspect.signature`` follows ``__wrapped__``) and
    pickles as ``prefetched(function)``.
    """

    def __init__(self, fn: Callable[..., Any]) -> None:
        functools.update_wrapper(self, fn)

    def __call__(self, doc: Any, *args: Any, **kwargs: Any) -> Any:
        fn = self.__wrapped__
        # Multi-round calls (round_idx, previous_output) depend on earlier replies: never ahead of time.
        if getattr(_TLS, "in_worker", False) or any(k != "lmms_eval_specific_kwargs" for k in kwargs):
            return fn(doc, *args, **kwargs)
        return _layer().call(self, doc, lambda: fn(doc, *args, **kwargs))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return prefetched, (self.__wrapped__,)

    def __repr__(self) -> str:
        return f"prefetched({getattr(self.__wrapped__, '__module__', '?')}.{getattr(self.__wrapped__, '__qualname__', '?')})"


def prefetched(fn: Callable[..., Any]) -> PrefetchedHook:
    """Wrap a task's ``doc_to_messages`` or ``doc_to_visual`` so lmms-eval's request loop gets its
    values prepared ahead (see the module docstring). Idempotent."""
    return fn if isinstance(fn, PrefetchedHook) else PrefetchedHook(fn)


def _hook_target(fn: Any) -> PrefetchedHook | None:
    """The prefetched hook that calling ``fn`` (an Instance argument) runs, if any."""
    if isinstance(fn, PrefetchedHook):
        return fn
    owner, name = getattr(fn, "__self__", None), getattr(fn, "__name__", None)
    if owner is None or name not in ("doc_to_messages", "doc_to_visual"):
        return None
    target = getattr(getattr(owner, "config", None), name, None)  # lmms-eval's Task.<hook> calls config.<hook>
    return target if isinstance(target, PrefetchedHook) else None


@dataclass
class _Plan:
    source: Any  # held so that its id cannot be reused while we compare fingerprints
    fingerprint: tuple
    docs: dict[tuple[str, str], Any]
    hooks: dict[tuple[str, str], PrefetchedHook]
    jobs: list[Job]
    core: Prefetcher
    progress: _Progress = field(init=False)

    def __post_init__(self) -> None:
        self.progress = _Progress(len(self.jobs))


def _build_plan(source: Any, fingerprint: tuple, task_dict: Mapping[str, Any], order: list[tuple]) -> _Plan:
    """The requests of ``order`` whose hook is a prefetched one, as a plan with its own Prefetcher."""
    docs: dict[tuple[str, str], Any] = {}
    hooks: dict[tuple[str, str], PrefetchedHook] = {}
    callers: dict[tuple[str, str], Callable[[Any], Any]] = {}
    jobs: list[Job] = []
    for args in order:
        if len(args) < 6:
            continue
        doc_id, task, split = args[-3], args[-2], args[-1]  # the last three in every generate_until shape
        caller = next((a for a in args[1:-3] if _hook_target(a) is not None), None)
        if caller is None or not isinstance(doc_id, int):
            continue
        key = (task, split)
        if key not in docs:
            try:
                docs[key] = task_dict[task][split]
            except (KeyError, TypeError, IndexError):
                continue
            hooks[key], callers[key] = _hook_target(caller), caller  # type: ignore[assignment]
        jobs.append((key, doc_id))
    core = Prefetcher()
    core.set_plan(jobs)
    for key, dataset in docs.items():
        # A worker calls what the model calls (the task's method): the same arguments reach the hook.
        core.register_docs(key, dataset, callers[key])
    return _Plan(source, fingerprint, docs, hooks, jobs, core)


class _Progress:
    """Requests prepared, and how long the model loop waited for them; logged while that is the bottleneck."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.wait_s = 0.0
        self.start = self.window_start = time.monotonic()
        self.window_wait = 0.0
        self.finished = False

    def record(self, wait_s: float, core: Prefetcher) -> None:
        from lmms_eval_plugins.frame_cache import COUNTERS

        self.done += 1
        self.wait_s += wait_s
        self.window_wait += wait_s
        now = time.monotonic()
        window = now - self.window_start
        if window >= PROGRESS_EVERY_S and self.done < self.total:
            if self.window_wait / window >= PROGRESS_MIN_WAIT_SHARE:
                rate = self.done / max(now - self.start, 1e-9)
                _logger().info(
                    f"preparing media: {self.done}/{self.total} requests ({100 * self.done / max(self.total, 1):.0f}%), "
                    f"about {(self.total - self.done) / rate / 60:.1f} min left; the model waited for its inputs "
                    f"{100 * self.window_wait / window:.0f}% of the last {window:.0f} s; "
                    f"{core.stats.ready + core.stats.waited} prepared ahead ({core.workers} workers); "
                    f"frame cache: {COUNTERS.hits} hits, {COUNTERS.misses} decoded"
                )
            self.window_start, self.window_wait = now, 0.0
        if self.done >= self.total and not self.finished:
            self.finished = True
            if self.wait_s >= 1.0:
                _logger().info(
                    f"preparing media: all {self.total} requests done; the model waited {self.wait_s:.1f} s for inputs "
                    f"({self.wait_s / max(self.total, 1):.3f} s a request), {core.stats.ready + core.stats.waited} "
                    f"prepared ahead; frame cache: {COUNTERS.hits} hits, {COUNTERS.misses} decoded"
                )


class _Layer:
    """This process's link between lmms-eval's request loop and a :class:`Prefetcher`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._plan: _Plan | None = None

    def call(self, hook: PrefetchedHook, doc: Any, compute: Callable[[], Any]) -> Any:
        start = time.perf_counter()
        with self._lock:
            plan, job = self._plan, None
            loop = (
                frames.find_request_loop()
            )  # every call: a new loop (a new generate_until) must not reuse an old plan
            if loop is not None:
                source, task_dict, order = loop
                fingerprint = frames.fingerprint(source)
                if plan is None or plan.fingerprint != fingerprint:
                    if plan is not None:
                        plan.core.close(timeout=0)
                    plan = self._plan = _build_plan(source, fingerprint, task_dict, order())
                job = self._match(plan, hook, doc)
        if job is None or plan is None:  # outside a loop, or a request the order did not foresee
            return compute()
        value = plan.core.get(*job, compute=compute)
        with self._lock:
            plan.progress.record(time.perf_counter() - start, plan.core)
        return value

    @staticmethod
    def _match(plan: _Plan, hook: PrefetchedHook, doc: Any) -> Job | None:
        """The planned request this call is: among those near the cursor, the one with this hook and document."""
        for job in plan.core.near(plan.core.ahead):
            key, index = job
            if plan.hooks.get(key) is hook:  # type: ignore[arg-type]
                try:
                    if plan.docs[key][index] == doc:  # type: ignore[index]
                        return job
                except Exception:
                    continue
        return None

    def close(self) -> None:
        with self._lock:
            if self._plan is not None:
                self._plan.core.close()
                self._plan = None

    @property
    def plan(self) -> _Plan | None:
        return self._plan


_LAYER: tuple[int, _Layer] | None = None
_LAYER_LOCK = threading.Lock()


def _layer() -> _Layer:
    """This process's layer; a forked child gets a new one (the parent's threads and locks did not come along)."""
    global _LAYER
    pid = os.getpid()
    current = _LAYER
    if current is not None and current[0] == pid:
        return current[1]
    with _LAYER_LOCK:
        if _LAYER is None or _LAYER[0] != pid:
            _LAYER = (pid, _Layer())
        return _LAYER[1]


def _after_fork_in_child() -> None:
    global _LAYER, _LAYER_LOCK
    _LAYER, _LAYER_LOCK = None, threading.Lock()


def shutdown() -> None:
    """Stop this process's prefetch workers (run at exit)."""
    current = _LAYER
    if current is not None and current[0] == os.getpid():
        current[1].close()


def layer_stats() -> dict[str, Any] | None:
    """The current plan's numbers (for the bench and the tests), or None before any plan."""
    current = _LAYER
    plan = current[1].plan if current is not None and current[0] == os.getpid() else None
    if plan is None:
        return None
    return {
        "planned": len(plan.jobs),
        "done": plan.progress.done,
        "wait_s": plan.progress.wait_s,
        **dataclasses.asdict(plan.core.stats),
        "workers": plan.core.workers,
        "budget": plan.core.budget,
        "ahead": plan.core.ahead,
    }


atexit.register(shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
