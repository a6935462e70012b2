"""The hub path, offline: our loaders against a loopback hub (tests/hub_server.py) through the real
``huggingface_hub`` (``HF_ENDPOINT``), and ErrorRadar's image URLs against the same loopback.

Each benchmark's fake repository is built from its bundled sample in the layout docs/hub-layouts.md
describes. ``huggingface_hub`` reads its settings (endpoint, cache, offline mode, timeouts) from the
environment when it is imported, so the fixtures set both the environment and those constants; one
test runs a fresh process on the environment alone.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from lmms_eval_plugins import data
from lmms_eval_plugins.errors import DataError, MediaError
from testkit.task_utils import load_task_utils

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_server import FakeHub, Fault

er = load_task_utils("errorradar")
mm = load_task_utils("mmerror")
cv = load_task_utils("crossvid")

TOKEN = "hf_terms_accepted"
ER_AUTO = [{"benchmark": "errorradar", "source": "auto"}]
ER_SAMPLE = [{"benchmark": "errorradar", "source": "sample"}]
MM_AUTO = [{"benchmark": "mmerror", "source": "auto"}]
MM_SAMPLE = [{"benchmark": "mmerror", "source": "sample"}]
CV_AUTO = {"benchmark": "crossvid", "source": "auto"}
CV_SAMPLE = {"benchmark": "crossvid", "source": "sample"}


# ------------------------------------------------------------------------------------------- fixtures


def hub_environment(tmp_path: Path, endpoint: str) -> dict[str, str]:
    """What a user sets (and the tests need): the endpoint, private caches, short timeouts, no token."""
    home = tmp_path / "hf-home"
    return {
        "HF_ENDPOINT": endpoint,
        "HF_HOME": str(home),
        "HF_HUB_CACHE": str(home / "hub"),
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp_path / "plugin-cache"),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_HUB_DISABLE_PROGRESS_BARS": "1",
        "HF_HUB_ETAG_TIMEOUT": "3",
        "HF_HUB_DOWNLOAD_TIMEOUT": "3",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        data.DOWNLOAD_TIMEOUT_ENV: "0.5",
        data.DOWNLOAD_RETRIES_ENV: "2",
    }


def set_offline(monkeypatch, offline: bool) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1" if offline else "0")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", offline)


@pytest.fixture()
def hub(tmp_path, monkeypatch):
    import importlib
    import socket

    from huggingface_hub import constants

    real_getaddrinfo = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):  # the safety net: no name but the loopback resolves
        if host not in ("127.0.0.1", "localhost"):
            raise socket.gaierror(socket.EAI_NONAME, f"test_hub.py: {host} is not the loopback")
        return real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)
    with FakeHub() as fake:
        for name, value in hub_environment(tmp_path, fake.endpoint).items():
            monkeypatch.setenv(name, value)
        for name in (
            "HF_TOKEN",
            "HUGGING_FACE_HUB_TOKEN",
            "HF_TOKEN_PATH",
            "HF_HUB_OFFLINE",
            "HF_HUB_OFFLINE",
            "TRANSFORMERS_OFFLINE",
            data.DATA_ROOT_ENV,
            data.SKIP_MISSING_MEDIA_ENV,
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "http_proxy",
            "https_proxy",
            "ALL_PROXY",
            "all_proxy",
        ):
            monkeypatch.delenv(name, raising=False)
        importlib.reload(constants)  # huggingface_hub reads its settings when imported
        try:
            yield fake
        finally:
            monkeypatch.undo()
            importlib.reload(constants)


def sample_png(question_id: str) -> bytes:
    return (er.SAMPLE_DIR / "images" / f"{question_id}.png").read_bytes()


def add_errorradar(hub: FakeHub) -> dict[str, str]:
    """``ErrorRadar/ErrorRadar``: the sample CSV with its ``content_image`` URLs on the loopback; {id: URL path}."""
    with open(er.SAMPLE_DIR / er.CSV_NAME, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        columns, rows = reader.fieldnames, list(reader)
    paths = {}
    for row in rows:
        paths[row["question_id"]] = path = f"/images/{row['question_id']}.png"
        row["content_image"] = hub.add_url(path, sample_png(row["question_id"]))
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    hub.add_dataset(er.HUB_REPO, {er.CSV_NAME: out.getvalue().encode(), "README.md": b"# ErrorRadar (fake)\n"})
    return paths


def add_mmerror(hub: FakeHub) -> None:
    hub.add_dataset_folder(mm.HUB_REPO, mm.SAMPLE_DIR, extra={"README.md": b"# MMErroR (fake)\n"})


def add_crossvid(hub: FakeHub) -> None:
    hub.add_dataset_folder(cv.HUB_REPO, cv.SAMPLE_DIR, extra={"README.md": b"# CrossVid (fake)\n"})


def without(doc: dict, *fields: str) -> dict:
    return {k: v for k, v in doc.items() if k not in fields}


def er_docs(spec) -> list[dict]:
    return list(er.process_docs_step(spec))


def cv_comparable(doc: dict) -> dict:
    """A CrossVid doc without the places its files were read from."""
    out = without(doc, "media_root", "bbox_path")
    out["media"] = [without(m, "path") for m in doc["media"]]
    return out


# ------------------------------------------------------------------------------------------ ErrorRadar


def test_errorradar_downloads_once_then_runs_offline_from_the_cache(hub, monkeypatch):
    paths = add_errorradar(hub)
    first = er_docs(ER_AUTO)
    sample = er_docs(ER_SAMPLE)
    # the hub's records are the sample's records; only where the image came from differs
    assert [without(d, "image_path", "content_image") for d in first] == [
        without(d, "image_path", "content_image") for d in sample
    ]
    for doc in first:
        assert Path(doc["image_path"]).read_bytes() == sample_png(doc["question_id"])
        assert Path(doc["image_path"]).is_relative_to(Path(os.environ[data.CACHE_ENV]))
    assert len(hub.seen("GET", "/resolve/main/ErrorRadar_dataset.csv")) == 1
    assert sorted(r.path for r in hub.seen("GET", "/images/")) == sorted(paths.values())

    hub.stop()
    set_offline(monkeypatch, True)
    again = er_docs(ER_AUTO)
    assert again == first


def test_a_fresh_process_on_the_environment_alone_reuses_the_cache(hub, tmp_path):
    add_errorradar(hub)
    first = er_docs(ER_AUTO)
    env = {
        **os.environ,
        **hub_environment(tmp_path, hub.endpoint),
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": os.pathsep.join(
            filter(None, [str(Path(__file__).resolve().parent), os.environ.get("PYTHONPATH")])
        ),
    }
    hub.stop()
    script = textwrap.dedent("""
        import json
        from testkit.task_utils import load_task_utils
        er = load_task_utils("errorradar")
        docs = er.process_docs_step([{"benchmark": "errorradar", "source": "auto"}])
        print(json.dumps([[d["question_id"], d["image_path"]] for d in docs]))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], check=False, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [[d["question_id"], d["image_path"]] for d in first]


def test_offline_without_a_cache_names_the_file_and_the_fix(hub, monkeypatch):
    add_errorradar(hub)
    set_offline(monkeypatch, True)
    with pytest.raises(DataError) as info:
        er_docs(ER_AUTO)
    message = str(info.value)
    assert er.CSV_NAME in message and er.HUB_REPO in message and "HF_HUB_OFFLINE" in message
    assert data.DATA_ROOT_ENV in message and not hub.requests


@pytest.mark.parametrize("chunk", [None, 256])
def test_a_csv_download_cut_mid_file_is_retried_and_complete(hub, monkeypatch, chunk):
    """huggingface_hub resumes from the bytes it wrote (``Range``); it writes in chunks of
    ``DOWNLOAD_CHUNK_SIZE`` (10 MB), so a small file cut short is fetched again whole."""
    from huggingface_hub import constants

    if chunk:
        monkeypatch.setattr(constants, "DOWNLOAD_CHUNK_SIZE", chunk)
    add_errorradar(hub)
    csv_bytes = hub.repos[er.HUB_REPO].files[er.CSV_NAME]
    cut = 1024
    hub.fault_file(er.HUB_REPO, er.CSV_NAME, Fault(drop_after=cut))
    path = data.hub_file(er.HUB_REPO, er.CSV_NAME)
    assert path.read_bytes() == csv_bytes
    gets = hub.seen("GET", "/resolve/main/" + er.CSV_NAME)
    assert [g.headers.get("range") for g in gets] == [None, f"bytes={cut}-" if chunk else None]
    assert [g.status for g in gets] == [200, 206 if chunk else 200]


def test_the_hub_answering_500_once_is_retried(hub):
    add_errorradar(hub)
    hub.fault_file(er.HUB_REPO, er.CSV_NAME, Fault(status=500))
    assert data.hub_file(er.HUB_REPO, er.CSV_NAME).read_bytes() == hub.repos[er.HUB_REPO].files[er.CSV_NAME]


@pytest.mark.parametrize(
    "token, status, why",
    [
        (None, 401, "no Hugging Face token was sent"),
        ("hf_not_accepted", 403, "has not been granted access"),
    ],
)
def test_a_gated_file_names_the_repo_the_file_and_the_fix(hub, monkeypatch, token, status, why):
    add_errorradar(hub)
    hub.gate(er.HUB_REPO, TOKEN)
    if token:
        monkeypatch.setenv("HF_TOKEN", token)
    with pytest.raises(DataError) as info:
        er_docs(ER_AUTO)
    error = info.value
    assert f"{er.CSV_NAME} of the hub dataset {er.HUB_REPO} is gated" in error.problem
    assert why in error.problem and f"HTTP {status}" in error.problem
    assert error.path.endswith(f"/datasets/{er.HUB_REPO}/resolve/main/{er.CSV_NAME}")
    assert "accept the dataset's terms" in error.fix and f"/datasets/{er.HUB_REPO}" in error.fix
    assert "HF_TOKEN" in error.fix and data.DATA_ROOT_ENV in error.fix


def test_a_gated_dataset_downloads_with_an_accepted_token(hub, monkeypatch):
    add_errorradar(hub)
    hub.gate(er.HUB_REPO, TOKEN)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert len(er_docs(ER_AUTO)) == len(er_docs(ER_SAMPLE))


def test_a_missing_file_or_dataset_names_it(hub):
    add_errorradar(hub)
    del hub.repos[er.HUB_REPO].files[er.CSV_NAME]
    with pytest.raises(DataError) as info:
        er_docs(ER_AUTO)
    assert info.value.problem == f"{er.CSV_NAME} is not in the hub dataset {er.HUB_REPO} (HTTP 404)"
    assert "layout" in info.value.fix and data.DATA_ROOT_ENV in info.value.fix

    with pytest.raises(DataError) as info:
        data.hub_file("nobody/nothing", "x.csv")
    assert "the hub dataset nobody/nothing was not found (HTTP 404)" in info.value.problem
    assert "HF_TOKEN" in info.value.fix


# ------------------------------------------------------------------------------ ErrorRadar's image URLs


def _first_id() -> str:
    return er_docs(ER_SAMPLE)[0]["question_id"]


def test_a_slow_image_times_out_and_the_retry_gets_it(hub):
    paths = add_errorradar(hub)
    slow = paths[_first_id()]
    hub.fault_url(slow, Fault(delay=2.0, times=1))
    started = time.monotonic()
    docs = er_docs(ER_AUTO)
    assert len(docs) == 10 and len(hub.seen("GET", slow)) == 2
    assert time.monotonic() - started < 10


def test_an_image_that_stays_slow_is_a_named_error_with_the_settings(hub):
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(delay=2.0, times=None))
    with pytest.raises(MediaError) as info:
        er_docs(ER_AUTO)
    error = info.value
    assert error.record == qid and hub.url(paths[qid]) in error.problem
    assert "in 3 attempt(s)" in error.problem and "no answer within 0.5s" in error.problem
    assert data.DOWNLOAD_TIMEOUT_ENV in error.fix and data.DOWNLOAD_RETRIES_ENV in error.fix
    assert len(hub.seen("GET", paths[qid])) == 3


def test_an_image_answering_500_then_200_is_fetched(hub):
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(status=500, times=2))
    docs = {d["question_id"]: d for d in er_docs(ER_AUTO)}
    assert Path(docs[qid]["image_path"]).read_bytes() == sample_png(qid)
    assert [r.status for r in hub.seen("GET", paths[qid])] == [500, 500, 200]


def test_an_image_cut_mid_file_is_resumed_and_complete(hub):
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(drop_after=100))
    docs = {d["question_id"]: d for d in er_docs(ER_AUTO)}
    assert Path(docs[qid]["image_path"]).read_bytes() == sample_png(qid)
    assert [r.headers.get("range") for r in hub.seen("GET", paths[qid])] == [None, "bytes=100-"]


@pytest.mark.parametrize(
    "status, words", [(404, "not found"), (403, "forbidden"), (401, "the server asks for credentials")]
)
def test_an_image_refused_for_good_is_a_named_error_at_once(hub, status, words):
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(status=status, times=None))
    with pytest.raises(MediaError) as info:
        er_docs(ER_AUTO)
    error = info.value
    assert error.record == qid and f"HTTP {status} ({words}" in error.problem and hub.url(paths[qid]) in error.problem
    assert data.SKIP_MISSING_MEDIA_ENV in error.fix and data.DATA_ROOT_ENV in error.fix
    assert len(hub.seen("GET", paths[qid])) == 1  # not retried
    cache = Path(os.environ[data.CACHE_ENV]) / "errorradar" / "images"
    assert not list(cache.glob(".*.part"))  # no partial file left behind


def test_a_missing_image_is_skipped_and_counted_when_asked(hub, monkeypatch):
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(status=404, times=None))
    monkeypatch.setenv(data.SKIP_MISSING_MEDIA_ENV, "1")
    docs = er_docs(ER_AUTO)
    assert qid not in {d["question_id"] for d in docs} and len(docs) == 9
    items = [er.process_results_step(d, [d["oracle_response"]])["skipped_by_reason"] for d in docs]
    assert er.agg_skipped_by_reason(items) == {"missing media": 1} and er.agg_skipped(items) == 1


def test_a_trickling_image_stops_at_the_total_deadline(hub, monkeypatch):
    """A byte every 0.05 s never trips the 0.5 s read timeout; the 1.5 s deadline for the file ends it (issue 27)."""
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(trickle=0.05, times=None))
    monkeypatch.setenv(data.DOWNLOAD_DEADLINE_ENV, "1.5")
    started = time.monotonic()
    with pytest.raises(MediaError) as info:
        er_docs(ER_AUTO)
    assert time.monotonic() - started < 5
    error = info.value
    assert (
        error.record == qid and "not complete within the deadline" in error.problem and "deadline 1.5s" in error.problem
    )
    assert data.DOWNLOAD_DEADLINE_ENV in error.fix
    assert len(hub.seen("GET", paths[qid])) == 1  # past the deadline: no retry
    assert not list((Path(os.environ[data.CACHE_ENV]) / "errorradar" / "images").glob(f"{qid}*"))


def test_an_endless_image_stops_at_the_size_cap_and_is_skipped_when_asked(hub, monkeypatch):
    paths = add_errorradar(hub)
    qid = _first_id()
    hub.fault_url(paths[qid], Fault(endless=True, times=None))
    monkeypatch.setenv(data.DOWNLOAD_MAX_BYTES_ENV, "100000")
    with pytest.raises(MediaError) as info:
        er_docs(ER_AUTO)
    assert "past the cap of 100,000 bytes" in info.value.problem and data.DOWNLOAD_MAX_BYTES_ENV in info.value.fix
    assert len(hub.seen("GET", paths[qid])) == 1
    cache = Path(os.environ[data.CACHE_ENV]) / "errorradar" / "images"
    assert not list(cache.glob(f"{qid}*")) and not list(cache.glob(".*.part"))
    monkeypatch.setenv(data.SKIP_MISSING_MEDIA_ENV, "1")
    docs = er_docs(ER_AUTO)
    assert len(docs) == 9 and er.agg_skipped_by_reason(
        [er.process_results_step(d, [d["oracle_response"]])["skipped_by_reason"] for d in docs]
    ) == {"missing media": 1}


def test_an_announced_length_above_the_cap_is_refused_before_the_body(hub, tmp_path):
    url = hub.add_url("/images/big.png", b"x" * 5000)
    with pytest.raises(MediaError) as info:
        data.fetch_url(url, tmp_path / "big.png", record="r1", limits=(10.0, 4096))
    assert "announces 5,000 bytes, above the cap of 4,096" in info.value.problem
    assert not (tmp_path / "big.png").exists()
    assert data.fetch_url(url, tmp_path / "big.png", record="r1", limits=(10.0, 5000)).stat().st_size == 5000


def test_download_limits_come_from_the_settings_and_refuse_bad_values(monkeypatch):
    monkeypatch.delenv(data.DOWNLOAD_DEADLINE_ENV, raising=False)
    monkeypatch.delenv(data.DOWNLOAD_MAX_BYTES_ENV, raising=False)
    assert data.download_limits() == (data.DEFAULT_DOWNLOAD_DEADLINE, data.DEFAULT_DOWNLOAD_MAX_BYTES)
    monkeypatch.setenv(data.DOWNLOAD_DEADLINE_ENV, "2.5")
    monkeypatch.setenv(data.DOWNLOAD_MAX_BYTES_ENV, "1000")
    assert data.download_limits() == (2.5, 1000)
    for name, bad in (
        (data.DOWNLOAD_DEADLINE_ENV, "0"),
        (data.DOWNLOAD_MAX_BYTES_ENV, "1.5"),
        (data.DOWNLOAD_MAX_BYTES_ENV, "0"),
    ):
        monkeypatch.setenv(name, bad)
        with pytest.raises(DataError, match=name):
            data.download_limits()
        monkeypatch.setenv(name, "7")


def _point_at(hub: FakeHub, qid: str, path: str, body: bytes) -> None:
    """Re-publish the CSV with ``qid``'s image at a new URL ``path`` serving ``body``."""
    text = hub.repos[er.HUB_REPO].files[er.CSV_NAME].decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    for row in rows:
        if row["question_id"] == qid:
            row["content_image"] = hub.add_url(path, body)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    hub.add_dataset(er.HUB_REPO, {er.CSV_NAME: out.getvalue().encode(), "README.md": b"# ErrorRadar (fake)\n"})


def test_a_changed_image_url_gets_the_new_image_not_the_cached_one(hub):
    add_errorradar(hub)
    qid = _first_id()
    first = {d["question_id"]: d for d in er_docs(ER_AUTO)}[qid]["image_path"]
    other = next(d["question_id"] for d in er_docs(ER_SAMPLE) if d["question_id"] != qid)
    _point_at(hub, qid, "/images/moved.png", sample_png(other))
    second = {d["question_id"]: d for d in er_docs(ER_AUTO)}[qid]["image_path"]
    assert second != first and Path(second).read_bytes() == sample_png(other)
    assert Path(first).read_bytes() == sample_png(qid)  # the old address keeps its own file
    assert len(hub.seen("GET", "/images/moved.png")) == 1


def test_fetch_url_reuses_a_finished_file_and_refuses_bad_settings(hub, tmp_path, monkeypatch):
    url = hub.add_url("/images/a.png", b"png bytes")
    dest = tmp_path / "dl" / "a.png"
    assert data.fetch_url(url, dest, record="r1").read_bytes() == b"png bytes"
    assert data.fetch_url(url, dest, record="r1") == dest and len(hub.seen("GET", "/images/a.png")) == 1
    for name, value in (
        (data.DOWNLOAD_TIMEOUT_ENV, "soon"),
        (data.DOWNLOAD_TIMEOUT_ENV, "0"),
        (data.DOWNLOAD_RETRIES_ENV, "-1"),
        (data.DOWNLOAD_RETRIES_ENV, "1.5"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(DataError) as info:
            data.fetch_all([(url, tmp_path / "b.png", "r2")])
        assert name in str(info.value) and "fix:" in str(info.value)
        monkeypatch.delenv(name)


def test_offline_an_uncached_image_is_missing_not_downloaded(hub, monkeypatch):
    add_errorradar(hub)
    first = {d["question_id"]: d for d in er_docs(ER_AUTO)}
    qid = _first_id()
    Path(first[qid]["image_path"]).unlink()  # one image lost from the cache
    images_seen = len(hub.seen("GET", "/images/"))
    set_offline(monkeypatch, True)
    with pytest.raises(MediaError) as info:
        er_docs(ER_AUTO)
    error = info.value
    assert error.record == qid and "HF_HUB_OFFLINE" in error.problem and "HF_HUB_OFFLINE" in error.fix
    assert len(hub.seen("GET", "/images/")) == images_seen  # nothing went out
    monkeypatch.setenv(data.SKIP_MISSING_MEDIA_ENV, "1")
    docs = er_docs(ER_AUTO)
    assert len(docs) == 9 and qid not in {d["question_id"] for d in docs}
    assert len(hub.seen("GET", "/images/")) == images_seen


# ------------------------------------------------------------------------------------------- MMErroR


def test_mmerror_downloads_its_snapshot_then_runs_offline(hub, monkeypatch):
    add_mmerror(hub)
    first = list(mm.process_docs_etc(MM_AUTO))
    sample = list(mm.process_docs_etc(MM_SAMPLE))
    assert [without(d, "image_path", "json_path") for d in first] == [
        without(d, "image_path", "json_path") for d in sample
    ]
    for hub_doc, sample_doc in zip(first, sample):
        assert Path(hub_doc["image_path"]).read_bytes() == Path(sample_doc["image_path"]).read_bytes()
    assert not hub.seen(contains="README.md")  # only data/jsons/* and data/images/* are fetched
    hub.stop()
    set_offline(monkeypatch, True)
    assert list(mm.process_docs_etc(MM_AUTO)) == first


def test_mmerror_image_cut_mid_file_through_the_cdn_is_fetched_again(hub):
    add_mmerror(hub)
    name = "data/images/MMErroR_00001.png"
    blob = hub.repos[mm.HUB_REPO].files[name]
    hub.fault_file(mm.HUB_REPO, name, Fault(drop_after=len(blob) // 2))
    docs = {d["question_id"]: d for d in mm.process_docs_etc(MM_AUTO)}
    assert Path(docs["MMErroR_00001"]["image_path"]).read_bytes() == blob
    assert len(hub.seen("HEAD", name)) == 1  # the hub once, then the CDN it redirects to, twice
    assert len([r for r in hub.seen("GET", "/cdn/") if r.path.endswith(hashlib.sha256(blob).hexdigest())]) == 2


def test_mmerror_gated_snapshot_names_the_fix(hub):
    add_mmerror(hub)
    hub.gate(mm.HUB_REPO, TOKEN)
    with pytest.raises(DataError) as info:
        list(mm.process_docs_etc(MM_AUTO))
    error = info.value
    assert f"of the hub dataset {mm.HUB_REPO} is gated" in error.problem and "HTTP 401" in error.problem
    assert f"/datasets/{mm.HUB_REPO}/resolve/" in error.path  # the file the hub refused
    assert "accept the dataset's terms" in error.fix and "HF_TOKEN" in error.fix


def test_mmerror_repository_in_another_layout_is_a_named_error(hub):
    hub.add_dataset(mm.HUB_REPO, {"README.md": b"moved", "jsons/MMErroR_00001.json": b"{}"})
    with pytest.raises(DataError) as info:
        list(mm.process_docs_etc(MM_AUTO))
    assert info.value.problem == (f"the hub dataset {mm.HUB_REPO} has no file matching data/jsons/*, data/images/*")
    assert "layout" in info.value.fix


# ------------------------------------------------------------------------------------------- CrossVid


@pytest.mark.parametrize("task", ["MSR", "CC"])
def test_crossvid_downloads_only_what_a_task_needs_then_runs_offline(hub, monkeypatch, task):
    add_crossvid(hub)
    first = cv.load_docs(CV_AUTO, task)
    sample = cv.load_docs(CV_SAMPLE, task)
    assert [cv_comparable(d) for d in first] == [cv_comparable(d) for d in sample]
    for hub_doc, sample_doc in zip(first, sample):
        for got, want in zip(hub_doc["media"], sample_doc["media"]):
            if want["kind"] == "folder":
                assert sorted(p.name for p in Path(got["path"]).iterdir()) == sorted(
                    p.name for p in Path(want["path"]).iterdir()
                )
            else:
                assert Path(got["path"]).read_bytes() == Path(want["path"]).read_bytes()
    needed = {f"QA/{task}.json"} | {p.split("/*")[0] for p in cv.hub_patterns(sample)}
    fetched = {r.path.split("/", 6)[6] for r in hub.seen("HEAD", f"/datasets/{cv.HUB_REPO}/resolve/")}
    assert fetched and all(any(f == n or f.startswith(n + "/") for n in needed) for f in fetched)

    hub.stop()
    set_offline(monkeypatch, True)
    assert cv.load_docs(CV_AUTO, task) == first


def test_crossvid_task_missing_on_the_hub_names_the_file(hub):
    add_crossvid(hub)
    del hub.repos[cv.HUB_REPO].files["QA/PSS.json"]
    with pytest.raises(DataError) as info:
        cv.load_docs(CV_AUTO, "PSS")
    assert info.value.problem == f"the hub dataset {cv.HUB_REPO} has no file matching QA/PSS.json"


def test_crossvid_video_missing_on_the_hub_is_skipped_when_asked(hub, monkeypatch):
    add_crossvid(hub)
    del hub.repos[cv.HUB_REPO].files["videos/behavior/bh1.mp4"]  # the hub does not redistribute these
    with pytest.raises(MediaError) as info:
        cv.load_docs(CV_AUTO, "BU")
    assert "bh1.mp4" in str(info.value)
    monkeypatch.setenv(data.SKIP_MISSING_MEDIA_ENV, "1")
    docs = cv.load_docs(CV_AUTO, "BU")
    assert docs and docs[0]["skipped_records"] == [{"reason": "missing media", "count": 1}]


def test_crossvid_offline_with_another_task_cached_names_the_fix(hub, monkeypatch):
    add_crossvid(hub)
    cv.load_docs(CV_AUTO, "MSR")
    hub.stop()
    set_offline(monkeypatch, True)
    with pytest.raises(DataError) as info:
        cv.load_docs(CV_AUTO, "CC")
    assert "QA/CC.json" in info.value.problem and "HF_HUB_OFFLINE=1 forbids downloading it" in info.value.problem
    assert "run once with network access" in info.value.fix


# --------------------------------------------------------------------------------------- the real CLI


@pytest.mark.cli
def test_the_cli_runs_a_hub_task_then_reruns_it_offline(hub, tmp_path):
    from lmms_eval_plugins.cli_run import run_lmms_eval

    add_errorradar(hub)
    env = hub_environment(tmp_path, hub.endpoint)
    online = run_lmms_eval(
        tasks="errorradar_step",
        model="oracle",
        output_dir=tmp_path / "online",
        env={**env, "HF_HUB_OFFLINE": "0"},
        extra_args=["--limit", "4"],
        timeout=300,
    )
    results = online.task_results("errorradar_step")
    assert results["step_acc"] == 100.0 and results["skipped"] == 0, online.tail()
    assert len(hub.seen("GET", f"/resolve/main/{er.CSV_NAME}")) == 1 and hub.seen("GET", "/images/")

    hub.stop()  # the run helper's default environment has HF_HUB_OFFLINE=1
    offline = run_lmms_eval(
        tasks="errorradar_step",
        model="oracle",
        output_dir=tmp_path / "offline",
        env=env,
        extra_args=["--limit", "4"],
        timeout=300,
    )
    assert offline.task_results("errorradar_step")["step_acc"] == 100.0, offline.tail()


def test_an_unreachable_hub_names_the_first_failure_and_the_fix(hub):
    """huggingface_hub wraps a refused connection in LocalEntryNotFoundError; the message shows the cause.
    (Built by hand: the real path waits through huggingface_hub's own retries, about 20 s.)"""
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        try:
            raise ConnectionRefusedError(111, "Connection refused")
        except ConnectionRefusedError as cause:
            raise LocalEntryNotFoundError("An error happened while trying to locate the file on the Hub") from cause
    except LocalEntryNotFoundError as wrapped:
        error = data._hub_error(wrapped, er.HUB_REPO, er.CSV_NAME, "URL")
    assert error.problem == (
        f"could not download {er.CSV_NAME} from the hub dataset {er.HUB_REPO} "
        "(ConnectionRefusedError: [Errno 111] Connection refused)"
    )
    assert hub.endpoint in error.fix and "HF_ENDPOINT" in error.fix and data.DATA_ROOT_ENV in error.fix


def test_a_run_asks_the_hub_only_for_uncached_data_it_needs_and_names_why_it_cannot_download(
    hub, monkeypatch, tmp_path
):
    """Issue 37 case 11: data the hub can send is no blocker; data it cannot (offline, unreachable) is one."""
    from huggingface_hub import constants

    from lmms_eval_plugins import doctor

    assert doctor.run_blockers(["errorradar_step"]) == ([], [])  # not cached, but the hub answers
    assert len(hub.seen("GET", "/api/datasets/ErrorRadar/ErrorRadar")) == 1
    (facts,) = doctor.gather_data(["errorradar"], probe=["errorradar"])
    assert facts.hub_problem is None and doctor.data_check(facts, ["errorradar_step"]).status == "note"
    asked = len(hub.requests)
    doctor.run_blockers(["errorradar_step_sample", "errorradar_sample"])  # sample tasks: the hub is not asked
    assert len(hub.requests) == asked
    add_errorradar(hub)
    er_docs(ER_AUTO)
    asked = len(hub.requests)
    assert doctor.run_blockers(["errorradar_step"]) == ([], []) and len(hub.requests) == asked  # cached: no question
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "another-empty-cache"))
    endpoint = hub.endpoint
    hub.stop()
    (blocker,), _ = doctor.run_blockers(["errorradar_step"])
    assert blocker.status == "FAIL" and "cannot be downloaded now" in blocker.detail and endpoint in blocker.detail
    assert "needed by errorradar_step" in blocker.detail and data.DATA_ROOT_ENV in blocker.fix
    (offline,) = doctor.gather_data(["errorradar"], probe=["errorradar"], offline=True)
    assert offline.hub_problem == "HF_HUB_OFFLINE=1 forbids downloading"
