"""``lmms-eval-plugins doctor``: is this install able to run, and what can it run today?

One short table, one row per check: Python and lmms-eval against the supported ranges, every entry of
the lmms-eval compatibility layer, the key packages against the tested set (known-bad versions fail,
other untested ones are a note), a real decord decode of a bundled sample video (frame cache
bypassed), a write into the frame cache folder, CUDA, each installed benchmark's data (local folder
or Hugging Face cache; never downloaded: for data that ``--tasks`` need and the cache lacks, one bounded
request asks whether the hub answers) and the judge's configuration; ``--judge`` also sends the judge one
tiny request. Exit status 1 when something every run needs is broken (versions,
compatibility, decoder, cache folder), and, with ``--tasks``, when those tasks lack their data or a
judge; else 0. No network except those two probes.

:func:`run_blockers` is the same check of a run's tasks, made before its model loads.

The verdicts are pure functions of the facts gathered (``*_check``), so each is unit-tested alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from lmms_eval_plugins import tested_versions
from lmms_eval_plugins.console import emit
from lmms_eval_plugins.safe_files import write_atomic
from lmms_eval_plugins.tested_versions import KnownBad

Status = Literal["ok", "FAIL", "note"]
HINT = "(check the install: lmms-eval-plugins doctor)"
JUDGE_PROBE_TIMEOUT_S = 10.0
PROBE_MODEL = "gpt-4o"  # the judged tasks' default judge model (CrossVid CCQA asks gpt-4.1)
REINSTALL_FIX = "reinstall through the lock: pip install -c constraints.txt .  (see the README's install line)"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str
    fix: str = ""


# ------------------------------------------------------------------------------------ pure verdicts


def _in(version: str, specifier: str) -> bool | None:
    """Whether ``version`` is in ``specifier`` (pre-releases included); None when either does not parse."""
    try:
        return SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return None


def python_check(version: str, supported: str) -> Check:
    if _in(version, supported):
        return Check("python", "ok", f"{version} (supported: {supported})")
    return Check(
        "python",
        "FAIL",
        f"{version} is outside the supported range {supported}",
        f"use a Python {supported} interpreter for the virtual environment",
    )


def lmms_eval_check(installed: str | None, supported: str, tested: str | None) -> Check:
    if installed is None:
        return Check("lmms-eval", "FAIL", "not installed", f"pip install 'lmms-eval{supported}'")
    if not _in(installed, supported):
        return Check(
            "lmms-eval",
            "FAIL",
            f"{installed} is outside the supported range {supported}",
            f"pip install 'lmms-eval=={tested}'" if tested else f"pip install 'lmms-eval{supported}'",
        )
    if tested and Version(installed) != Version(tested):
        return Check("lmms-eval", "note", f"{installed}: in range {supported}, untested (CI tests {tested})")
    return Check("lmms-eval", "ok", f"{installed} (supported: {supported})")


def known_bad_for(package: str, installed: str, known_bad: Iterable[KnownBad]) -> KnownBad | None:
    """The first known-bad entry whose range holds ``installed``."""
    return next((kb for kb in known_bad if kb.package == package and _in(installed, kb.specifier)), None)


def package_check(package: str, installed: str | None, tested: str | None, known_bad: Iterable[KnownBad]) -> Check:
    """Known-bad: FAIL with its fix; another version than the tested one: a note; missing: FAIL."""
    if installed is None:
        return Check(
            package, "FAIL", "not installed", f"pip install '{package}=={tested}'" if tested else REINSTALL_FIX
        )
    bad = known_bad_for(package, installed, known_bad)
    if bad is not None:
        return Check(package, "FAIL", f"{installed} is known bad ({bad.specifier}): {bad.reason}", bad.fix)
    if tested is None:
        return Check(package, "ok", installed)
    try:
        same = Version(installed) == Version(tested)
    except InvalidVersion:
        same = installed == tested
    if same:
        return Check(package, "ok", f"{installed} (tested)")
    return Check(package, "note", f"{installed}: untested (CI tests {tested})")


def compat_checks(results: Sequence[Any] | None, error: str | None = None) -> list[Check]:
    """One row when every compatibility entry is present; else one FAIL row per missing entry.

    ``results``: ``compat.check_all()``'s EntryChecks; ``error``: why the check itself could not run.
    """
    if error is not None or results is None:
        return [Check("compatibility", "FAIL", f"could not check the lmms-eval entries: {error}", REINSTALL_FIX)]
    bad = [r for r in results if not r.ok]
    if not bad:
        return [Check("compatibility", "ok", f"all {len(results)} lmms-eval entries present")]
    return [
        Check(
            f"compat {r.entry.name}",
            "FAIL",
            f"{r.entry.target}: {r.problem or 'missing'}; without it: {r.entry.without}",
            REINSTALL_FIX,
        )
        for r in bad
    ]


DECODER_FIX = "pip install 'decord==0.6.0'  (eva-decord on macOS arm64)"


def decoder_check(video: str | None, frames: int, error: str | None) -> Check:
    if error is not None:
        return Check(
            "video decoder", "FAIL", f"decord could not decode {video or 'a bundled video'}: {error}", DECODER_FIX
        )
    if video is None:
        return Check("video decoder", "note", "no installed benchmark bundles a sample video: decoding not tried")
    if frames <= 0:
        return Check("video decoder", "FAIL", f"decord returned no frames for {video}", DECODER_FIX)
    return Check("video decoder", "ok", f"decord decoded {frames} frames of {video}")


def cache_check(folder: str | None, error: str | None) -> Check:
    """``folder`` None: the frame cache is switched off (a note: runs decode every time)."""
    if folder is None:
        return Check("frame cache", "note", "switched off (LMMS_EVAL_PLUGINS_FRAME_CACHE): every run decodes again")
    if error is not None:
        return Check(
            "frame cache",
            "FAIL",
            f"{folder} is not writable: {error}",
            f"make {folder} writable, or set LMMS_EVAL_PLUGINS_FRAME_CACHE to a writable folder (or 'off')",
        )
    return Check("frame cache", "ok", f"{folder} is writable")


def cuda_check(available: bool | None, detail: str) -> Check:
    """Never a failure: the plugin runs API models and tiny models on a CPU."""
    if available:
        return Check("cuda", "ok", detail)
    return Check(
        "cuda", "note", f"{detail}: local models run on the CPU only (slow)" if available is not None else detail
    )


@dataclass(frozen=True)
class DataFacts:
    """Where a benchmark's full data would be read from (as ``data.resolve_source`` decides)."""

    benchmark: str
    data_root: str | None  # LMMS_EVAL_PLUGINS_DATA_ROOT, when set
    local_found: bool  # DATA_ROOT/<benchmark> is a folder
    hub_repo: str | None  # None: the data is not on the hub
    hub_cached: str | None  # the hub snapshot in the Hugging Face cache, when there
    hub_problem: str | None = (
        "not asked"  # why it cannot be downloaded now (data.hub_unreachable); None: the hub answers
    )


def data_check(facts: DataFacts, needed_by: Sequence[str] = ()) -> Check:
    """Found: ok. Missing: a note (sample tasks still run), or FAIL when ``needed_by`` names tasks that need it."""
    name = f"{facts.benchmark} data"
    if facts.data_root:
        folder = str(Path(facts.data_root) / facts.benchmark)
        if facts.local_found:
            return Check(name, "ok", f"local folder {folder}")
        why = f"LMMS_EVAL_PLUGINS_DATA_ROOT is set but holds no '{facts.benchmark}' folder ({folder}; the hub is not read then)"
        fix = f"put the data in {folder} (layout: lmms-eval-plugins info {facts.benchmark}), or unset LMMS_EVAL_PLUGINS_DATA_ROOT"
    elif facts.hub_repo and facts.hub_cached:
        return Check(name, "ok", f"Hugging Face cache: {facts.hub_cached}")
    elif facts.hub_repo and needed_by and facts.hub_problem is None:  # the run downloads it: nothing to fix
        return Check(
            name,
            "note",
            f"not in the Hugging Face cache yet: {facts.hub_repo} is downloaded on the first run "
            f"of {', '.join(needed_by)} (the hub answers)",
        )
    elif facts.hub_repo:
        why = f"not in the Hugging Face cache ({facts.hub_repo} is downloaded on the first run)"
        if needed_by and facts.hub_problem != "not asked":
            why = f"not in the Hugging Face cache, and {facts.hub_repo} cannot be downloaded now ({facts.hub_problem})"
        fix = (
            f"run once with network access, or set LMMS_EVAL_PLUGINS_DATA_ROOT to a folder holding "
            f"'{facts.benchmark}/' (layout: lmms-eval-plugins info {facts.benchmark})"
        )
    else:
        why = "not public: needs a local copy"
        fix = (
            f"set LMMS_EVAL_PLUGINS_DATA_ROOT to a folder holding '{facts.benchmark}/' "
            f"(layout: lmms-eval-plugins info {facts.benchmark})"
        )
    if needed_by:
        return Check(name, "FAIL", f"{why}; needed by {', '.join(needed_by)}", fix)
    return Check(name, "note", f"{why}: sample tasks only ({facts.benchmark}_sample)", fix)


@dataclass(frozen=True)
class JudgeFacts:
    offline: bool  # LMMS_EVAL_PLUGINS_JUDGE=offline
    host: str | None  # the endpoint's scheme://host[:port] (never the key); None: none configured
    origin: str = ""  # where the endpoint came from, in words
    model: str = ""
    error: str | None = None  # a configuration the judge refuses (JudgeConfigError's message)


JUDGE_FIX = (
    "set OPENAI_BASE_URL (a vLLM/SGLang /v1 URL) and/or OPENAI_API_KEY, or LMMS_EVAL_PLUGINS_JUDGE=offline "
    "(docs/judges.md)"
)


def judge_check(facts: JudgeFacts, needed_by: Sequence[str] = (), judged: Sequence[str] = ()) -> Check:
    """``judged``: the benchmarks with judged tasks (shown when no judge is configured)."""
    if facts.offline:
        return Check(
            "judge", "ok", "offline judges (LMMS_EVAL_PLUGINS_JUDGE=offline): scores not comparable with the papers'"
        )
    if facts.host and facts.error is None:
        return Check("judge", "ok", f"{facts.host} ({facts.origin}), model {facts.model}; --judge sends it one request")
    if facts.error is not None and needed_by:  # a configuration the judge refuses: a blocker to fix
        return Check("judge", "FAIL", f"{facts.error}; needed by {', '.join(needed_by)}", JUDGE_FIX)
    why = facts.error or "no judge endpoint configured"
    # as the README says: without a judge a judged task still runs; only its judged metrics stay null
    which = ", ".join(needed_by) or (f"the judged tasks of {', '.join(judged)}" if judged else "the judged tasks")
    return Check(
        "judge",
        "note",
        f"{why}: {which} run, with their judged metrics null (N/A) until a judge "
        "scores them (`lmms-eval-plugins score`); everything else is scored",
        JUDGE_FIX,
    )


def judge_probe_check(host: str | None, model: str, seconds: float, error: str | None) -> Check:
    if host is None:
        return Check("judge answers", "FAIL", "no judge endpoint configured to ask", JUDGE_FIX)
    if error is not None:
        return Check(
            "judge answers",
            "FAIL",
            f"{host} (model {model}) did not answer in {seconds:.1f} s: {error}",
            "check that the server runs and the URL, key and model (LMMS_EVAL_PLUGINS_JUDGE_MODEL) are right",
        )
    return Check("judge answers", "ok", f"{host} answered in {seconds:.1f} s (model {model})")


def task_check(task: str, known: bool) -> Check | None:
    """A requested task that no installed benchmark provides fails; known tasks get no row of their own."""
    if known:
        return None
    return Check(
        f"task {task}",
        "FAIL",
        "no installed benchmark provides this task or group",
        "`lmms-eval-plugins tasks` lists the installed tasks",
    )


def can_run(checks: Sequence[Check]) -> str:
    """What runs today, from the data and judge rows."""
    full = [c.name.removesuffix(" data") for c in checks if c.name.endswith(" data") and c.status == "ok"]
    sample = [c.name.removesuffix(" data") for c in checks if c.name.endswith(" data") and c.status != "ok"]
    judged = all(c.status == "ok" for c in checks if c.name in ("judge", "judge answers")) and any(
        c.name == "judge" for c in checks
    )
    parts = [
        f"full data: {', '.join(full)}" if full else "",
        f"sample tasks only: {', '.join(sample)}" if sample else "",
        "judged metrics: yes" if judged else "judged metrics: null (no working judge)",
    ]
    return "can run today: " + "; ".join(p for p in parts if p)


def exit_status(checks: Iterable[Check]) -> int:
    return 1 if any(c.status == "FAIL" for c in checks) else 0


def render(checks: Sequence[Check]) -> list[str]:
    """The table: check, status, detail; a failure's fix on the line below it."""
    width = max((len(c.name) for c in checks), default=5)
    lines = [f"{'check':<{width}}  {'status':<6}  detail", f"{'-' * width}  ------  ------"]
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.status:<6}  {c.detail}")
        if c.fix and c.status == "FAIL":
            lines.append(f"{'':<{width}}  {'':<6}  fix: {c.fix}")
    return lines


_IMPORT_ERROR = re.compile(r"(ModuleNotFoundError|ImportError|AttributeError)\b.*")


def fixes_for_log(text: str, installed: Mapping[str, str | None], known_bad: Iterable[KnownBad]) -> list[str]:
    """Fixes for a failed lmms-eval run: each known-bad version installed, and each known-bad package
    an import error in ``text`` names (``No module named 'filelock._api'``)."""
    errors = [m.group(0) for m in _IMPORT_ERROR.finditer(text)]
    fixes: list[str] = []
    for kb in known_bad:
        version = installed.get(kb.package)
        named = any(re.search(rf"['\"\s]{re.escape(kb.package)}[.'\"\s]", error) for error in errors)
        if (version is not None and _in(version, kb.specifier)) or named:
            line = f"{kb.package} {version or ''}: {kb.reason}. Fix: {kb.fix}".replace("  :", ":")
            if line not in fixes:
                fixes.append(line)
    return fixes


# ------------------------------------------------------------------------------------------ facts


def installed_version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def installed_versions(packages: Iterable[str]) -> dict[str, str | None]:
    return {p: installed_version(p) for p in packages}


def _short(exc: BaseException, limit: int = 160) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    text = text if len(text) <= limit else text[:limit] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def gather_compat() -> list[Check]:
    try:
        from lmms_eval_plugins.compat import check_all

        return compat_checks(check_all())
    except Exception as exc:  # lmms-eval itself fails to import (e.g. a known-bad dependency)
        return compat_checks(None, _short(exc))


def sample_video() -> Path | None:
    """The first bundled sample video of the installed benchmarks (in registry order)."""
    from lmms_eval_plugins.benchmark import ordered_benchmarks

    for spec in ordered_benchmarks():
        folder = spec.sample_dir or spec.tasks_dir / "sample_data"
        if folder.is_dir():
            videos = sorted(folder.rglob("*.mp4"))
            if videos:
                return videos[0]
    return None


def gather_decoder() -> Check:
    video = None
    try:
        video = sample_video()
        if video is None:
            return decoder_check(None, 0, None)
        from lmms_eval_plugins import media
        from lmms_eval_plugins.frame_cache import FRAME_CACHE_ENV

        saved = os.environ.get(FRAME_CACHE_ENV)
        os.environ[FRAME_CACHE_ENV] = "off"  # a cached entry would hide a broken decoder
        try:
            frames = media.sample_video(video, 4).frames
        finally:
            if saved is None:
                os.environ.pop(FRAME_CACHE_ENV, None)
            else:
                os.environ[FRAME_CACHE_ENV] = saved
        return decoder_check(str(video), len(frames), None)
    except Exception as exc:  # ImportError, MediaError: the decoder is broken either way
        return decoder_check(str(video) if video else None, 0, _short(exc))


def gather_cache() -> Check:
    from lmms_eval_plugins.frame_cache import cache_folder

    folder = cache_folder()
    if folder is None:
        return cache_check(None, None)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = write_atomic(folder / f".doctor-probe-{os.getpid()}", b"ok")
        probe.unlink()
        return cache_check(str(folder), None)
    except OSError as exc:
        return cache_check(str(folder), _short(exc))


def gather_cuda() -> Check:
    try:
        import torch  # lazily: the slowest import here
    except Exception as exc:
        return cuda_check(None, f"torch does not import: {_short(exc)}")
    try:
        if torch.cuda.is_available():
            n = torch.cuda.device_count()
            return cuda_check(True, f"{n} GPU(s), {torch.cuda.get_device_name(0)}")
    except Exception as exc:  # a broken driver: still only a note
        return cuda_check(False, f"no GPU usable ({_short(exc)})")
    return cuda_check(False, "no GPU visible")


def _hub_repo(name: str) -> str | None:
    """The hub dataset of benchmark ``name``: ``HUB_REPO`` of the ``tasks`` module beside its spec."""
    import importlib

    from lmms_eval_plugins.benchmark import ENTRY_POINT_GROUP

    for ep in metadata.entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            package = ep.value.partition(":")[0].rpartition(".")[0]
            try:
                repo = getattr(importlib.import_module(f"{package}.tasks"), "HUB_REPO", None)
            except Exception:  # a benchmark without a tasks module: no hub copy known
                return None
            return repo if isinstance(repo, str) and repo else None
    return None


def _hub_cached(repo: str, hub_cache: str | None = None) -> str | None:
    """The newest cached snapshot of dataset ``repo`` (``hub_cache``: default the Hugging Face cache); never downloads."""
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(repo_id=repo, repo_type="dataset", local_files_only=True, cache_dir=hub_cache)
    except Exception:  # not cached (LocalEntryNotFoundError), or no huggingface_hub
        return None


def gather_data(
    benchmarks: Sequence[str], hub_cache: str | None = None, *, probe: Iterable[str] = (), offline: bool | None = None
) -> list[DataFacts]:
    """``probe``: the benchmarks whose uncached hub data a run needs: the hub is asked whether it answers
    (one bounded request, ``data.hub_unreachable``; ``offline`` as there)."""
    from lmms_eval_plugins.data import DATA_ROOT_ENV, hub_unreachable

    root = os.environ.get(DATA_ROOT_ENV) or None
    probe = set(probe)
    out = []
    for name in benchmarks:
        local = bool(root) and (Path(root).expanduser() / name).is_dir()
        repo = None if root else _hub_repo(name)
        cached = _hub_cached(repo, hub_cache) if repo else None
        problem = hub_unreachable(repo, offline=offline) if repo and not cached and name in probe else "not asked"
        out.append(DataFacts(name, root, local, repo, cached, problem))
    return out


def gather_judge() -> JudgeFacts:
    from lmms_eval_plugins.judges.base import JudgeConfigError
    from lmms_eval_plugins.judges.endpoint import (
        ENV_JUDGE,
        resolve_endpoint,
        resolve_model,
    )

    if os.environ.get(ENV_JUDGE, "").strip().lower() == "offline":
        return JudgeFacts(True, None)
    try:
        endpoint = resolve_endpoint("judge")
    except JudgeConfigError as exc:
        configured = "none is configured" not in str(exc)
        return JudgeFacts(False, None, error=str(exc).split(". ")[0] if configured else None)
    return JudgeFacts(False, endpoint.host, endpoint.origin, resolve_model(PROBE_MODEL))


def probe_judge(timeout: float = JUDGE_PROBE_TIMEOUT_S) -> Check:
    """One chat request of one token to the configured judge, no retry, bounded like a judge call (the
    judge's reply cap and deadline, each at most ``timeout``), no redirect followed."""
    from lmms_eval_plugins.bounded_http import openai_client
    from lmms_eval_plugins.judges.base import JudgeConfigError
    from lmms_eval_plugins.judges.endpoint import resolve_endpoint, resolve_model
    from lmms_eval_plugins.judges.redaction import Redactor
    from lmms_eval_plugins.judges.runtime import RuntimeSettings

    try:
        endpoint = resolve_endpoint("judge")
    except JudgeConfigError:
        return judge_probe_check(None, "", 0.0, None)
    model = resolve_model(PROBE_MODEL)
    redact = Redactor()
    redact.add(endpoint.api_key)
    started = time.monotonic()
    try:
        settings = RuntimeSettings.from_env()  # a bad number is this row's failure, named
        client = openai_client(
            endpoint.base_url,
            endpoint.api_key,
            timeout=min(timeout, settings.timeout),
            deadline=min(timeout, settings.total_deadline),
            max_bytes=settings.max_body_bytes,
        )
        with client:
            started = time.monotonic()  # the judge's time, not the client's import
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "Reply OK."}], max_tokens=1
            )
        error = None
    except Exception as exc:  # connection refused, timeout, HTTP error: the cause is the row's detail
        cause = exc.__cause__ or exc.__context__
        status = getattr(exc, "status_code", None)
        error = redact(
            _short(exc)
            + (f" (HTTP {status})" if status else "")
            + (f" <- {_short(cause)}" if cause is not None and status is None else "")
        )
    return judge_probe_check(endpoint.host, model, time.monotonic() - started, error)


# ------------------------------------------------------------------------------------------ tasks


def _leaf_tasks(
    names: Mapping[str, str], groups: Mapping[str, list[Any]], name: str, seen: frozenset = frozenset()
) -> list[str]:
    if name in seen:
        return []
    if names.get(name) == "task":
        return [name]
    out: list[str] = []
    for member in groups.get(name, []):
        if isinstance(member, str):
            out += _leaf_tasks(names, groups, member, seen | {name})
        elif isinstance(member, dict) and isinstance(member.get("group"), str):
            out += _leaf_tasks(
                names, {**groups, member["group"]: member.get("task") or []}, member["group"], seen | {name}
            )
    return out


def _task_yamls() -> tuple[dict[str, str], dict[str, list[Any]], set[str]]:
    """(name -> task|group, group -> members, judged leaf tasks) over every installed benchmark's folder."""
    from lmms_eval_plugins.benchmark import ordered_benchmarks
    from lmms_eval_plugins.yaml_index import judged_tasks, read_task_yamls

    folders = [spec.tasks_dir for spec in ordered_benchmarks()]
    names: dict[str, str] = {}
    groups: dict[str, list[Any]] = {}
    for entry in read_task_yamls(folders, recursive=False):
        if entry.kind:
            names[entry.name] = entry.kind
        if entry.kind == "group":
            groups[entry.name] = list(entry.members)
    judged = set(judged_tasks(folders))
    return names, groups, judged


def requested_needs(requested: Sequence[str]) -> tuple[list[Check], dict[str, list[str]], list[str]]:
    """For ``--tasks``: rows for unknown tasks, benchmark -> requested tasks needing its full data,
    and the requested tasks needing a judge. A task needs full data unless it is a sample task (``yaml_index.is_sample_task``)."""
    from lmms_eval_plugins.benchmark import benchmark_of_task
    from lmms_eval_plugins.yaml_index import is_sample_task

    names, groups, judged = _task_yamls()
    rows: list[Check] = []
    data: dict[str, list[str]] = {}
    judge: list[str] = []
    for task in requested:
        row = task_check(task, task in names)
        if row is not None:
            rows.append(row)
            continue
        leaves = _leaf_tasks(names, groups, task)
        for leaf in leaves:
            spec = benchmark_of_task(leaf)
            if spec is not None and not is_sample_task(leaf) and task not in data.setdefault(spec.name, []):
                data[spec.name].append(task)
        if any(leaf in judged for leaf in leaves):
            judge.append(task)
    return rows, data, judge


def run_blockers(tasks: Sequence[str]) -> tuple[list[Check], list[Check]]:
    """Before a run's model loads: (blockers, warnings) of its requested tasks, every one at once.

    Blockers: the data rows ``doctor --tasks`` fails (missing, not public, not cached while the hub cannot
    be reached) and a judge configuration the judge refuses. Warnings: judged tasks without a judge (they
    run, with their judged metrics null). Tasks no installed benchmark provides are lmms-eval's to name.
    """
    from lmms_eval_plugins.data import hub_offline

    _, data_needs, judge_needs = requested_needs(tasks)
    rows = [
        data_check(f, data_needs[f.benchmark])
        for f in gather_data(list(data_needs), probe=data_needs, offline=hub_offline())
    ]
    if judge_needs:
        rows.append(judge_check(gather_judge(), judge_needs))
    return [r for r in rows if r.status == "FAIL"], [r for r in rows if r.status == "note" and r.name == "judge"]


# ------------------------------------------------------------------------------------------ main


def run_checks(tasks: Sequence[str] = (), judge: bool = False) -> list[Check]:
    from lmms_eval_plugins.data import hub_offline

    offline = hub_offline()  # as the user set it, before the line below
    os.environ["HF_HUB_OFFLINE"] = "1"  # the data probe reads the cache only (and asks local_files_only)
    from lmms_eval_plugins.benchmark import ordered_benchmarks

    tested = tested_versions.TESTED
    versions = installed_versions(["lmms-eval", *(p for p in tested_versions.KEY_PACKAGES if p != "lmms-eval")])
    checks = [
        python_check(platform.python_version(), tested_versions.PYTHON),
        lmms_eval_check(versions.pop("lmms-eval"), tested_versions.LMMS_EVAL, tested.get("lmms-eval")),
    ]
    checks += [package_check(p, v, tested.get(p), tested_versions.KNOWN_BAD) for p, v in versions.items()]
    checks += gather_compat()
    checks += [gather_decoder(), gather_cache(), gather_cuda()]
    task_rows, data_needs, judge_needs = requested_needs(tasks) if tasks else ([], {}, [])
    checks += [
        data_check(f, data_needs.get(f.benchmark, ()))
        for f in gather_data([b.name for b in ordered_benchmarks()], probe=data_needs, offline=offline)
    ]
    facts = gather_judge()
    checks.append(judge_check(facts, judge_needs, [b.name for b in ordered_benchmarks() if b.judge]))
    if judge:
        checks.append(probe_judge())
    return checks + task_rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lmms-eval-plugins doctor", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--tasks", default="", help="comma-separated tasks you mean to run: missing data or judge for them fails"
    )
    parser.add_argument(
        "--judge", action="store_true", help=f"send the judge one tiny request ({JUDGE_PROBE_TIMEOUT_S:.0f} s at most)"
    )
    parser.add_argument("--json", action="store_true", help="print the checks as JSON")
    args = parser.parse_args(argv)
    started = time.monotonic()
    checks = run_checks([t.strip() for t in args.tasks.split(",") if t.strip()], judge=args.judge)
    status = exit_status(checks)
    if args.json:
        emit(json.dumps({"exit_status": status, "checks": [asdict(c) for c in checks]}, indent=2))
        return status
    emit("\n".join(render(checks)))  # versions, paths and judge errors: control characters shown as escapes
    failed = [c.name for c in checks if c.status == "FAIL"]
    verdict = f"FAILED: {', '.join(failed)} (fix above)" if failed else "the install works"
    emit(f"\n{can_run(checks)}")
    emit(f"doctor: {verdict}; {time.monotonic() - started:.1f} s.")
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
