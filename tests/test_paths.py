"""One containment rule for every path built from data (data.safe_path), through each benchmark's loader.

An attacker controls the records (ids, paths) and what lies in the data folder (symbolic links). Nothing
outside the benchmark folder may be read and shown to the model, nothing written outside our cache.
Each refusal is a DataError (never a MediaError, so LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA cannot hide it)
naming the record, the field and the offending value.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from pathlib import Path

import pytest

from lmms_eval_plugins.data import DataSource
from lmms_eval_plugins.errors import DataError
from lmms_eval_plugins.media import frame_files, sample_frame_folder
from testkit.task_utils import load_task_utils
from lmms_eval_plugins.synthetic import make_frame_folder

er = load_task_utils("errorradar")
mm = load_task_utils("mmerror")
cv = load_task_utils("crossvid")
cs = load_task_utils("causalstep")
vr = load_task_utils("virectify")

ER_PNG = min((er.SAMPLE_DIR / "images").glob("*.png"))
MM_PNG = min((mm.SAMPLE_DIR / "data" / "images").glob("*.png"))


@pytest.fixture(autouse=True)
def _env(isolated_env, monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", raising=False)


def _refused(call, *, record: str, field: str, value: str | None = None, skip: bool = False, monkeypatch=None) -> str:
    if skip:
        monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    with pytest.raises(DataError) as info:
        call()
    assert type(info.value) is DataError, f"a skippable {type(info.value).__name__}: {info.value}"
    text = str(info.value)
    assert f"record: {record}" in text and field in text and "fix:" in text, text
    if value is not None:
        assert repr(value) in text, text
    return text


def _secret_png(tmp_path: Path, name: str = "secret.png") -> Path:
    shutil.copy(ER_PNG, tmp_path / name)
    return tmp_path / name


# ----------------------------------------------------------------------------------------------- ErrorRadar


def _er_row(question_id: str, content_image: str = "https://example.invalid/x.png") -> dict[str, str]:
    return {
        "question_id": question_id,
        "content_image": content_image,
        "study_level": "G1",
        "question_type": "t",
        "content": "What is 3+4?",
        "answer": "['7']",
        "user_answer": "8",
        "user_answer_steps": "Step 1: read.\nStep 2: 3+4=8.",
        "error_step": "Step 2",
        "error_category": "Calculation Error",
    }


def _write_csv(path: Path, rows: list[dict[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def _er_local(tmp_path: Path, monkeypatch, question_id: str) -> Path:
    """$DATA_ROOT/errorradar/ErrorRadar_dataset.csv (one row) plus an empty images/ folder."""
    folder = tmp_path / "data" / "errorradar"
    _write_csv(folder / er.CSV_NAME, [_er_row(question_id)])
    (folder / "images").mkdir()
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    return folder


def _er_load():
    return er.load_records(
        er.resolve_source(
            "errorradar", "auto", sample_dir=er.SAMPLE_DIR, hub_repo=er.HUB_REPO, local_layout=er.LOCAL_LAYOUT
        )
    )


def test_errorradar_question_id_with_dotdot_cannot_read_outside(tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    _secret_png(tmp_path / "data")  # where images/../../secret.png leads
    _er_local(tmp_path, monkeypatch, "../../secret")
    _refused(_er_load, record="../../secret", field="question_id", value="../../secret")


def test_errorradar_absolute_question_id_cannot_read_outside(tmp_path, monkeypatch):
    secret = _secret_png(tmp_path)
    question_id = str(secret.with_suffix(""))
    _er_local(tmp_path, monkeypatch, question_id)
    _refused(_er_load, record=question_id, field="question_id", value=question_id)


@pytest.mark.parametrize("question_id", ["..\\..\\secret", "abc\0def", "x/y", ".."])
def test_errorradar_question_ids_are_plain_names(tmp_path, question_id, monkeypatch):
    folder = tmp_path / "errorradar"
    (folder / "images").mkdir(parents=True)
    record = er.normalize_record(_er_row(question_id), line=2, path=folder / er.CSV_NAME)
    _refused(
        lambda: er._attach_local_images([record], folder),
        record=question_id,
        field="question_id",
        value=question_id,
        skip=True,
        monkeypatch=monkeypatch,
    )


def test_errorradar_image_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    secret = _secret_png(tmp_path)
    folder = _er_local(tmp_path, monkeypatch, "a" * 32)
    (folder / "images" / f"{'a' * 32}.png").symlink_to(secret)
    _refused(_er_load, record="a" * 32, field="question_id", skip=True, monkeypatch=monkeypatch)


def test_errorradar_images_folder_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    (tmp_path / "elsewhere").mkdir()
    shutil.copy(ER_PNG, tmp_path / "elsewhere" / f"{'a' * 32}.png")
    folder = _er_local(tmp_path, monkeypatch, "a" * 32)
    (folder / "images").rmdir()
    (folder / "images").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    _refused(_er_load, record="a" * 32, field="question_id")


def test_errorradar_image_linking_inside_the_root_is_read(tmp_path, monkeypatch):
    folder = _er_local(tmp_path, monkeypatch, "a" * 32)
    (folder / "shared").mkdir()
    shutil.copy(ER_PNG, folder / "shared" / "img.png")
    (folder / "images" / f"{'a' * 32}.png").symlink_to("../shared/img.png")
    [record] = _er_load()
    assert record["image_path"] == str((folder / "shared" / "img.png").resolve())
    assert er.doc_to_visual(record)[0].size


def _er_hub(tmp_path: Path, monkeypatch, rows: list[dict[str, str]]) -> DataSource:
    csv_path = _write_csv(tmp_path / "hub" / er.CSV_NAME, rows)
    monkeypatch.setattr(er, "hub_file", lambda repo, name: csv_path)
    return DataSource("errorradar", "hub", None, er.HUB_REPO)


def test_errorradar_hub_download_target_stays_in_the_cache(tmp_path, monkeypatch):
    source = _er_hub(tmp_path, monkeypatch, [_er_row("b" * 32), _er_row("../../../escaped")])
    written: list[Path] = []

    def fake_fetch_all(jobs):  # a download: write the file where the loader asks
        out = []
        for _, dest, _ in jobs:
            shutil.copy(ER_PNG, dest)
            written.append(dest)
            out.append(dest)
        return out

    monkeypatch.setattr(er, "fetch_all", fake_fetch_all)
    _refused(lambda: er.load_records(source), record="../../../escaped", field="question_id", value="../../../escaped")
    assert written == [] and not (tmp_path / "escaped.png").exists()


def test_errorradar_hub_images_land_in_the_cache(tmp_path, monkeypatch):
    source = _er_hub(tmp_path, monkeypatch, [_er_row("b" * 32)])
    monkeypatch.setattr(er, "fetch_all", lambda jobs: [shutil.copy(ER_PNG, dest) and dest for _, dest, _ in jobs])
    [record] = er.load_records(source)
    name = "b" * 32 + er.hub_image_suffix(_er_row("b")["content_image"])  # keyed by id and URL (issue 27)
    assert record["image_path"] == str((tmp_path / "cache" / "errorradar" / "images" / name).resolve())


def test_errorradar_hub_cache_entry_linking_out_is_refused(tmp_path, monkeypatch):
    secret = _secret_png(tmp_path)
    source = _er_hub(tmp_path, monkeypatch, [_er_row("c" * 32)])
    cache = tmp_path / "cache" / "errorradar" / "images"
    cache.mkdir(parents=True)
    planted = "c" * 32 + er.hub_image_suffix(_er_row("c")["content_image"])
    (cache / planted).symlink_to(secret)  # a planted "already downloaded" file
    _refused(lambda: er.load_records(source), record="c" * 32, field="question_id")


def test_errorradar_hub_refuses_file_urls(tmp_path, monkeypatch):
    secret = _secret_png(tmp_path)
    source = _er_hub(tmp_path, monkeypatch, [_er_row("d" * 32, content_image=secret.as_uri())])
    _refused(lambda: er.load_records(source), record="d" * 32, field="content_image", value=secret.as_uri())


# ----------------------------------------------------------------------------------------------- MMErroR


def _mm_record(question_id: str) -> dict[str, str]:
    return {
        "question_id": question_id,
        "question": "Q?",
        "correct_answer": "1",
        "error_reason": "Step 1: r.",
        "label": "B_Reasoning_Error",
        "domain": "M",
        "subdomain": "s",
    }


def _mm_local(tmp_path: Path, monkeypatch, question_id: str, *, image: bool = False) -> Path:
    """$DATA_ROOT/mmerror/data/jsons/MMErroR_00001.json plus data/images/ (the task README's layout)."""
    root = tmp_path / "data" / "mmerror"
    (root / "data" / "jsons").mkdir(parents=True)
    (root / "data" / "images").mkdir()
    (root / "data" / "jsons" / "MMErroR_00001.json").write_text(json.dumps(_mm_record(question_id)), encoding="utf-8")
    if image:
        shutil.copy(MM_PNG, root / "data" / "images" / f"{question_id}.png")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    return root


def _mm_load():
    return mm.load_records(
        mm.resolve_source(
            "mmerror", "auto", sample_dir=mm.SAMPLE_DIR, hub_repo=mm.HUB_REPO, local_layout=mm.LOCAL_LAYOUT
        )
    )


def test_mmerror_question_id_with_dotdot_cannot_read_outside(tmp_path, monkeypatch):
    _secret_png(tmp_path)  # data/images/../../../../secret.png
    _mm_local(tmp_path, monkeypatch, "../../../../secret")
    _refused(_mm_load, record="../../../../secret", field="question_id", value="../../../../secret")


def test_mmerror_absolute_question_id_cannot_read_outside(tmp_path, monkeypatch):
    question_id = str(_secret_png(tmp_path).with_suffix(""))
    _mm_local(tmp_path, monkeypatch, question_id)
    _refused(_mm_load, record=question_id, field="question_id", value=question_id)


@pytest.mark.parametrize("question_id", ["..\\..\\secret", "MMErroR\u0000_1", "sub/MMErroR_1"])
def test_mmerror_question_ids_are_plain_names(tmp_path, monkeypatch, question_id):
    _mm_local(tmp_path, monkeypatch, question_id)
    _refused(_mm_load, record=question_id, field="question_id", value=question_id, skip=True, monkeypatch=monkeypatch)


def test_mmerror_image_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    secret = _secret_png(tmp_path)
    root = _mm_local(tmp_path, monkeypatch, "MMErroR_00001")
    (root / "data" / "images" / "MMErroR_00001.png").symlink_to(secret)
    _refused(_mm_load, record="MMErroR_00001", field="question_id", skip=True, monkeypatch=monkeypatch)


def test_mmerror_record_file_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    root = _mm_local(tmp_path, monkeypatch, "MMErroR_00001", image=True)
    (tmp_path / "outside.json").write_text(json.dumps(_mm_record("MMErroR_00002")), encoding="utf-8")
    (root / "data" / "jsons" / "MMErroR_00002.json").symlink_to(tmp_path / "outside.json")
    with pytest.raises(DataError, match="record file 'MMErroR_00002.json' escapes the benchmark folder"):
        _mm_load()


def test_mmerror_image_linking_inside_the_root_is_read(tmp_path, monkeypatch):
    root = _mm_local(tmp_path, monkeypatch, "MMErroR_00001")
    shutil.copy(MM_PNG, root / "data" / "shared.png")
    (root / "data" / "images" / "MMErroR_00001.png").symlink_to(root / "data" / "shared.png")
    [record] = _mm_load()
    assert record["image_path"] == str((root / "data" / "shared.png").resolve())


def _hub_snapshot(tmp_path: Path, source: Path, repo: str) -> Path:
    """A copy of ``source`` laid out as huggingface_hub's cache: snapshot files are links into ../blobs/."""
    store = tmp_path / "hf" / f"datasets--{repo.replace('/', '--')}"
    snapshot = store / "snapshots" / "0123abcd"
    (store / "blobs").mkdir(parents=True)
    for file in sorted(p for p in source.rglob("*") if p.is_file()):
        data = file.read_bytes()
        blob = store / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        link = snapshot / file.relative_to(source)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(Path(*[".."] * (len(link.relative_to(store).parts) - 1), "blobs", blob.name))
    return snapshot


def test_mmerror_hub_snapshot_links_into_its_blobs_and_no_further(tmp_path, monkeypatch):
    snapshot = _hub_snapshot(tmp_path, mm.SAMPLE_DIR, mm.HUB_REPO)
    monkeypatch.setattr(mm, "hub_snapshot", lambda repo, allow_patterns=None: snapshot)
    source = DataSource("mmerror", "hub", None, mm.HUB_REPO)
    records = mm.load_records(source)
    assert len(records) == 12 and all("/blobs/" in r["image_path"] for r in records)
    assert mm.doc_to_visual(records[0])[0].size
    link = snapshot / "data" / "images" / f"{records[0]['question_id']}.png"
    link.unlink()
    link.symlink_to(_secret_png(tmp_path))
    _refused(lambda: mm.load_records(source), record=records[0]["question_id"], field="question_id")


# ----------------------------------------------------------------------------------------------- CrossVid


def _cv_local(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "data" / "crossvid"
    shutil.copytree(cv.SAMPLE_DIR, folder)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "data"))
    return folder


def _cv_rows(task: str, **spec) -> list[dict]:
    return cv.load_docs({"benchmark": "crossvid", "source": "auto", "frames": 8, **spec}, task)


def _outside_frames(tmp_path: Path) -> Path:
    return make_frame_folder(tmp_path / "outside" / "7-1", num_frames=4)


def test_crossvid_frame_folder_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    folder = _cv_local(tmp_path, monkeypatch)
    view = folder / "uav" / "frames" / "1" / "7-1"
    shutil.rmtree(view)
    view.symlink_to(_outside_frames(tmp_path), target_is_directory=True)
    _refused(
        lambda: _cv_rows("MSR"), record="CrossVid MSR id 0", field="path of View A", skip=True, monkeypatch=monkeypatch
    )


def test_crossvid_frame_file_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    folder = _cv_local(tmp_path, monkeypatch)
    frame = folder / "uav" / "frames" / "1" / "7-1" / "frame_2.jpg"
    outside = _outside_frames(tmp_path)
    frame.unlink()
    frame.symlink_to(next(outside.iterdir()))
    row = next(r for r in _cv_rows("MSR") if r["id"] == "0")
    _refused(lambda: cv.sample_frames(row), record="CrossVid MSR id 0", field="frame file")
    _refused(lambda: cv.plan_frames(row), record="CrossVid MSR id 0", field="frame file")


def test_crossvid_frame_links_inside_the_root_are_read(tmp_path, monkeypatch):
    folder = _cv_local(tmp_path, monkeypatch)
    views = folder / "uav" / "frames" / "1"
    (views / "7-1").rename(folder / "store-7-1")
    (views / "7-1").symlink_to("../../../store-7-1", target_is_directory=True)  # a folder link inside
    frame = folder / "store-7-1" / "frame_2.jpg"
    shutil.copy(frame, folder / "frame-copy.jpg")
    frame.unlink()
    frame.symlink_to(folder / "frame-copy.jpg")  # a file link inside
    row = next(r for r in _cv_rows("MSR") if r["id"] == "0")
    view_a, _ = cv.sample_frames(row)
    assert view_a.frames and [p[0] for p in cv.plan_frames(row)] == [
        len(view_a.frames),
        len(cv.sample_frames(row)[1].frames),
    ]


def test_crossvid_vid_cannot_lead_out_of_the_root(tmp_path, monkeypatch):
    vid = "../../../../../outside/7"  # uav/frames/1/<vid>-1 -> tmp_path/outside/7-1
    _outside_frames(tmp_path)
    folder = _cv_local(tmp_path, monkeypatch)
    raw = json.loads((folder / "QA" / "MSR.json").read_text())
    (folder / "QA" / "MSR.json").write_text(json.dumps([{**raw[0], "vid": vid}]))
    _refused(lambda: _cv_rows("MSR"), record="CrossVid MSR id 0", field="path of View A")


def test_crossvid_video_linking_out_of_the_root_is_refused(tmp_path, monkeypatch):
    folder = _cv_local(tmp_path, monkeypatch)
    video = folder / "videos" / "cook" / "ck1.mp4"
    (tmp_path / "outside").mkdir()
    video.rename(tmp_path / "outside" / "ck1.mp4")
    video.symlink_to(tmp_path / "outside" / "ck1.mp4")
    raw = json.loads((folder / "QA" / "CC.json").read_text())
    assert any("cook/ck1.mp4" in v for r in raw for v in r["videos"])
    _refused(lambda: _cv_rows("CC"), record="CrossVid CC id", field="path of Video")


def test_crossvid_hub_snapshot_links_into_its_blobs_and_no_further(tmp_path, monkeypatch):
    snapshot = _hub_snapshot(tmp_path, cv.SAMPLE_DIR, cv.HUB_REPO)
    monkeypatch.setattr(cv, "hub_snapshot", lambda repo, allow_patterns=None: snapshot)
    row = next(r for r in _cv_rows("MSR") if r["id"] == "0")
    view_a, view_b = cv.sample_frames(row)
    assert view_a.frames and view_b.frames and view_a.frame_numbers[0] >= 1  # numbers from the link names
    assert [p[0] for p in cv.plan_frames(row)] == [len(view_a.frames), len(view_b.frames)]
    link = snapshot / "uav" / "frames" / "1" / "7-1" / "frame_2.jpg"
    link.unlink()
    link.symlink_to(next(_outside_frames(tmp_path).iterdir()))
    _refused(lambda: cv.sample_frames(row), record="CrossVid MSR id 0", field="frame file")


def test_frame_files_checks_the_folder_and_each_frame_against_the_root(tmp_path):
    root = tmp_path / "root"
    inside = make_frame_folder(root / "frames", num_frames=3)
    outside = make_frame_folder(tmp_path / "outside", num_frames=3)
    assert [n for n, _ in frame_files(inside, "r", root=root)] == [0, 1, 2]
    (root / "linked").symlink_to(outside, target_is_directory=True)
    assert len(frame_files(root / "linked")) == 3  # without a root: no containment (callers outside the data)
    _refused(lambda: frame_files(root / "linked", "r", root=root), record="r", field="frame folder")
    _refused(
        lambda: sample_frame_folder(root / "linked", 2, record_id="r", root=root), record="r", field="frame folder"
    )
    (inside / "frame_7.jpg").symlink_to(next(outside.iterdir()))
    _refused(lambda: frame_files(inside, "r", root=root), record="r", field="frame file")
    (inside / "frame_7.jpg").unlink()
    (inside / "frame_7.jpg").symlink_to(inside / "frame_0.jpg")  # inside: fine, numbered by the link's name
    assert [n for n, _ in frame_files(inside, "r", root=root)] == [0, 1, 2, 7]


# ----------------------------------------------------------------------------------------------- CausalStep, ViRectify


def _video_source(bench: str, tmp_path: Path, video: str):
    """A local root of one record whose 'video' field is ``video``: (module, source, record id)."""
    if bench == "causalstep":
        module, folder = cs, tmp_path / "causalstep"
        shutil.copytree(cs.SAMPLE_DIR / "videos", folder / "videos")
        record = json.loads((cs.SAMPLE_DIR / cs.JSON_NAME).read_text())[1]
        record_id = record["video_id"]
        (folder / cs.JSON_NAME).write_text(json.dumps([{**record, "video": video}]))
    else:
        module, folder = vr, tmp_path / "virectify"
        shutil.copytree(vr.SAMPLE_DIR / "videos", folder / "videos")
        record = json.loads((vr.SAMPLE_DIR / vr.JSONL_NAME).read_text().splitlines()[0])
        record_id = record["id"]
        (folder / vr.JSONL_NAME).write_text(json.dumps({**record, "video": video}) + "\n")
    (tmp_path / "outside").mkdir(exist_ok=True)
    shutil.copy(next((folder / "videos").glob("*.mp4")), tmp_path / "outside" / "clip.mp4")
    source = module.resolve_source(bench, "sample", sample_dir=folder, hub_repo=None, local_layout="")
    return module, source, record_id, folder


BAD_VIDEOS = {
    "dotdot": lambda folder: "../outside/clip.mp4",
    "dotdot-inside": lambda folder: "videos/../../outside/clip.mp4",
    "absolute": lambda folder: str(folder.parent / "outside" / "clip.mp4"),
    "backslash": lambda folder: "videos\\..\\..\\outside\\clip.mp4",
    "nul": lambda folder: "videos/clip.mp4\0",
    "empty": lambda folder: " ",
}


@pytest.mark.parametrize("bench", ["causalstep", "virectify"])
@pytest.mark.parametrize("case", sorted(BAD_VIDEOS))
def test_video_fields_cannot_lead_out_of_the_root(tmp_path, monkeypatch, bench, case):
    value = BAD_VIDEOS[case](tmp_path / bench)
    module, source, record_id, _ = _video_source(bench, tmp_path, value)
    _refused(
        lambda: module.load_records(source),
        record=record_id,
        field="video",
        value=value,
        skip=True,
        monkeypatch=monkeypatch,
    )


@pytest.mark.parametrize("bench", ["causalstep", "virectify"])
@pytest.mark.parametrize("link", ["file", "folder"])
def test_video_links_out_of_the_root_are_refused(tmp_path, monkeypatch, bench, link):
    module, source, record_id, folder = _video_source(
        bench, tmp_path, "ext/clip.mp4" if link == "folder" else "videos/x.mp4"
    )
    if link == "folder":
        (folder / "ext").symlink_to(tmp_path / "outside", target_is_directory=True)
    else:
        (folder / "videos" / "x.mp4").symlink_to(tmp_path / "outside" / "clip.mp4")
    _refused(lambda: module.load_records(source), record=record_id, field="video", skip=True, monkeypatch=monkeypatch)


@pytest.mark.parametrize("bench", ["causalstep", "virectify"])
@pytest.mark.parametrize("link", ["file", "folder"])
def test_video_links_inside_the_root_are_read(tmp_path, bench, link):
    module, source, record_id, folder = _video_source(
        bench, tmp_path, "ext/real.mp4" if link == "folder" else "videos/x.mp4"
    )
    # the record's own video: its segments and key times must lie within it
    real = next(p for p in sorted((folder / "videos").glob("*.mp4")) if p.stem == record_id or bench == "virectify")
    if link == "folder":
        (folder / "ext").mkdir()
        shutil.copy(real, folder / "ext" / "real.mp4")
        (folder / "ext").rename(folder / "store")
        (folder / "ext").symlink_to("store", target_is_directory=True)
        expected = folder / "store" / "real.mp4"
    else:
        (folder / "videos" / "x.mp4").symlink_to(real.name)
        expected = real
    [record] = module.load_records(source)
    assert record["video_path"] == str(expected.resolve())
