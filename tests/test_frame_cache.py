"""The persistent frame cache: bit-identical frames, no decoding on a hit, corruption, LRU eviction,
several processes on one folder, and the switches."""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from lmms_eval_plugins import frame_cache, media
from lmms_eval_plugins.frame_cache import FrameCache
from lmms_eval_plugins.media import SampledFrames, sample_frame_folder, sample_video, video_info
from lmms_eval_plugins.synthetic import decode_frame_index, make_frame_folder, make_video


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "frames"
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(folder))
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_FRAME_CACHE_MB", raising=False)
    media._probe.cache_clear()  # the in-process probe cache would hide the persistent one
    return folder


@pytest.fixture(scope="module")
def video(tmp_path_factory) -> Path:
    """6 s at 10 fps, 200x150: 60 frames, each showing its index."""
    return make_video(tmp_path_factory.mktemp("v") / "v.mp4", seconds=6, width=200, height=150, seed=3)


def same(a: SampledFrames, b: SampledFrames) -> None:
    """Every field equal, and every frame the same mode, size and bytes."""
    assert (a.timestamps, a.indices, a.path, a.fps, a.frame_numbers, a.source_size) == (
        b.timestamps,
        b.indices,
        b.path,
        b.fps,
        b.frame_numbers,
        b.source_size,
    )
    assert [(f.mode, f.size) for f in a.frames] == [(f.mode, f.size) for f in b.frames]
    for x, y in zip(a.frames, b.frames):
        assert np.array_equal(np.asarray(x), np.asarray(y))
        assert x.tobytes() == y.tobytes()


def no_decoding(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("decoded although the frame cache holds the frames")

    monkeypatch.setattr(media, "_reader", refuse)
    monkeypatch.setattr(media, "_load_image", refuse)


def entry_files(folder: Path) -> list[Path]:
    return sorted((folder / "entries").glob("*/*.fc"))


SAMPLINGS = {
    "whole video": dict(num_frames=8),
    "one interval": dict(num_frames=5, interval=(1.0, 3.5)),
    "intervals": dict(num_frames=9, intervals=[(4.0, 5.5), (0.2, 1.0)]),
    "shrunk while decoding": dict(num_frames=6, max_long_side=64),
    "more frames than the video": dict(num_frames=100, interval=(2.0, 2.6)),
}


@pytest.mark.parametrize("kwargs", SAMPLINGS.values(), ids=SAMPLINGS.keys())
def test_cached_frames_are_bit_identical_to_fresh_decoding(video, cache_dir, monkeypatch, kwargs):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    fresh = sample_video(video, **kwargs)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(cache_dir))
    stored = sample_video(video, **kwargs)  # a miss: decoded and stored
    same(stored, fresh)
    assert len(entry_files(cache_dir)) == 1
    no_decoding(monkeypatch)
    hit = sample_video(video, **kwargs)
    same(hit, fresh)
    assert [decode_frame_index(f) for f in hit.frames] == hit.indices


def test_pil_fallback_sizes_are_cached_identically(tmp_path, cache_dir, monkeypatch):
    # decord's scaler rejects 96x72 -> 48x36; media.py shrinks in PIL then: that path is cached too.
    path = make_video(tmp_path / "small.mp4", seconds=3, fps=4, width=96, height=72)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    fresh = sample_video(path, 4, max_long_side=48)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(cache_dir))
    sample_video(path, 4, max_long_side=48)
    no_decoding(monkeypatch)
    same(sample_video(path, 4, max_long_side=48), fresh)


def test_frame_folders_are_cached_identically(tmp_path, cache_dir, monkeypatch):
    folder = make_frame_folder(tmp_path / "f", num_frames=30, width=120, height=90, start_number=5, step=2)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    fresh = sample_frame_folder(folder, 7, fps=2.0, max_long_side=60, root=tmp_path)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(cache_dir))
    sample_frame_folder(folder, 7, fps=2.0, max_long_side=60, root=tmp_path)
    no_decoding(monkeypatch)
    same(sample_frame_folder(folder, 7, fps=2.0, max_long_side=60, root=tmp_path), fresh)


def test_a_second_run_decodes_nothing_not_even_the_size_probe(video, cache_dir, monkeypatch):
    first = sample_video(video, 4, max_long_side=100)  # probes the size, decodes, stores both
    info = video_info(video)
    media._probe.cache_clear()  # a new process
    no_decoding(monkeypatch)
    assert video_info(video) == info
    same(sample_video(video, 4, max_long_side=100), first)


def test_different_parameters_and_edited_files_are_different_entries(tmp_path, cache_dir, monkeypatch):
    path = make_video(tmp_path / "v.mp4", seconds=3, seed=1)
    sample_video(path, 4)
    sample_video(path, 5)
    sample_video(path, 4, interval=(0.0, 1.0))
    assert len(entry_files(cache_dir)) == 3
    before = sample_video(path, 4)
    make_video(tmp_path / "other.mp4", seconds=3, seed=2).replace(path)  # same name, other pixels
    after = sample_video(path, 4)
    assert any(not np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(before.frames, after.frames))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    same(after, sample_video(path, 4))


def damage_truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def damage_flip_payload(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-10] ^= 0xFF
    path.write_bytes(bytes(data))


def damage_flip_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01
    path.write_bytes(bytes(data))


def damage_garbage(path: Path) -> None:
    path.write_bytes(os.urandom(path.stat().st_size))


def damage_delete(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize(
    "damage",
    [damage_truncate, damage_flip_payload, damage_flip_header, damage_garbage, damage_delete],
    ids=lambda f: f.__name__.removeprefix("damage_"),
)
def test_a_damaged_entry_is_detected_and_rebuilt_never_used(video, cache_dir, monkeypatch, damage):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    fresh = sample_video(video, 6, max_long_side=80)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(cache_dir))
    sample_video(video, 6, max_long_side=80)
    (entry,) = entry_files(cache_dir)
    damage(entry)
    rejected = frame_cache.COUNTERS.rejected
    same(sample_video(video, 6, max_long_side=80), fresh)  # decoded again
    if damage is not damage_delete:
        assert frame_cache.COUNTERS.rejected == rejected + 1
    assert len(entry_files(cache_dir)) == 1 and frame_cache.get_cache().stats()["entries"] == 1
    no_decoding(monkeypatch)
    same(sample_video(video, 6, max_long_side=80), fresh)  # the rebuilt entry serves


def test_a_damaged_index_is_set_aside_and_the_cache_keeps_working(video, tmp_path, monkeypatch):
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "index.sqlite3").write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(folder))
    cache = FrameCache(folder, 10**9)
    assert not cache.disabled
    assert list(folder.glob("index.sqlite3.corrupt-*"))
    assert cache.put("k", [np.zeros((4, 4, 3), np.uint8)], {})
    assert cache.get("k") is not None


def test_an_unwritable_folder_means_no_cache_not_an_error(video, tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(blocker / "frames"))
    assert frame_cache.get_cache() is None
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    fresh = sample_video(video, 3)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(blocker / "frames"))
    same(sample_video(video, 3), fresh)


def noise(seed: int, n: int = 1) -> list[np.ndarray]:
    """Incompressible frames: each entry's size on disk is predictable (about 30 KB a frame)."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (100, 100, 3), dtype=np.uint8) for _ in range(n)]


def test_least_recently_used_entries_are_evicted_at_the_cap(tmp_path):
    cache = FrameCache(tmp_path / "c", cap=100_000)  # room for 3 entries of ~30 KB
    for k in range(3):
        assert cache.put(f"e{k}", noise(k), {"k": k})
    assert cache.get("e0") is not None  # e0 is now the most recently used; e1 the least
    evicted = frame_cache.COUNTERS.evicted
    assert cache.put("e3", noise(3), {"k": 3})
    stats = cache.stats()
    assert stats["bytes"] <= 100_000 * frame_cache.LOW_WATER
    assert cache.get("e1") is None  # evicted: least recently used
    assert cache.get("e0") is not None and cache.get("e3") is not None
    assert frame_cache.COUNTERS.evicted > evicted
    on_disk = {p.name for p in entry_files(tmp_path / "c")}
    indexed = {r[0] for r in sqlite3.connect(tmp_path / "c" / "index.sqlite3").execute("SELECT file FROM entries")}
    assert on_disk == indexed  # evicted files are gone from disk too
    assert sum(p.stat().st_size for p in entry_files(tmp_path / "c")) == stats["bytes"]


def test_an_entry_larger_than_the_cap_is_not_stored(tmp_path):
    cache = FrameCache(tmp_path / "c", cap=10_000)
    assert not cache.put("big", noise(0, 2), {})
    assert cache.get("big") is None and cache.stats()["entries"] == 0


def test_the_cap_comes_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE_MB", "0.1")
    assert frame_cache.get_cache().cap == 100_000
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_FRAME_CACHE_MB")
    assert frame_cache.get_cache().cap == frame_cache.DEFAULT_CAP_MB * 1_000_000


@pytest.mark.parametrize("value", ["off", "0", "OFF", "false", "none"])
def test_the_off_switch(video, tmp_path, monkeypatch, value):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_CACHE", str(tmp_path / "plugin-cache"))
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", value)
    assert frame_cache.get_cache() is None
    sample_video(video, 3)
    assert not (tmp_path / "plugin-cache").exists()


def test_the_default_folder_is_under_the_plugin_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", raising=False)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_CACHE", str(tmp_path / "plugin-cache"))
    assert frame_cache.cache_folder() == tmp_path / "plugin-cache" / "frames"
    assert frame_cache.get_cache().root == tmp_path / "plugin-cache" / "frames"


def test_the_command_line_shows_and_clears_the_cache(video, cache_dir, capsys):
    sample_video(video, 4)
    sample_video(video, 5)
    assert frame_cache.main(["stats"]) == 0
    assert "2 entries" in capsys.readouterr().out
    (cache_dir / "entries" / "ab").mkdir(exist_ok=True)
    (cache_dir / "entries" / "ab" / "orphan.fc").write_bytes(b"x")
    assert frame_cache.main(["clear"]) == 0
    assert "removed 2 entries" in capsys.readouterr().out
    assert entry_files(cache_dir) == [] and frame_cache.get_cache().stats()["entries"] == 0


# ----------------------------------------------------------------------------------------------- processes


def _sample_in_child(folder: str, videos: list[str], barrier, queue) -> None:
    os.environ["LMMS_EVAL_PLUGINS_FRAME_CACHE"] = folder
    from lmms_eval_plugins import frame_cache as fc
    from lmms_eval_plugins.media import sample_video as sample

    barrier.wait()  # all processes write the same entries at the same moment
    out = []
    for _ in range(2):
        for path in videos:
            for k in (3, 7):
                s = sample(path, k, max_long_side=90)
                out.append([np.asarray(f).tobytes() for f in s.frames])
    queue.put((out, vars(fc.COUNTERS)))


def test_processes_sharing_one_cache_write_the_same_entries_safely(tmp_path, monkeypatch):
    videos = [str(make_video(tmp_path / f"v{k}.mp4", seconds=4, width=160, height=120, seed=k)) for k in range(3)]
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", "off")
    expected = [
        [np.asarray(f).tobytes() for f in sample_video(p, k, max_long_side=90).frames] for p in videos for k in (3, 7)
    ] * 2
    folder = str(tmp_path / "shared")
    ctx = multiprocessing.get_context("spawn")
    barrier, queue = ctx.Barrier(3), ctx.Queue()
    procs = [ctx.Process(target=_sample_in_child, args=(folder, videos, barrier, queue)) for _ in range(3)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(30)
        assert p.exitcode == 0
    for frames, counters in results:
        assert frames == expected
        assert counters["rejected"] == 0
        assert counters["hits"] >= 6  # the second pass of each process
    cache = FrameCache(Path(folder), 10**10)
    assert cache.stats()["entries"] == 6
    assert len(entry_files(Path(folder))) == 6
    for row in sqlite3.connect(Path(folder) / "index.sqlite3").execute("SELECT key FROM entries"):
        assert cache.get(row[0]) is not None  # every indexed entry is sound


def _fill_in_child(folder: str, cap: int, seed: int, barrier) -> None:
    from lmms_eval_plugins.frame_cache import FrameCache as FC

    cache = FC(Path(folder), cap)
    barrier.wait()
    for k in range(12):
        cache.put(f"p{seed}-{k}", noise(100 * seed + k), {})
        cache.get(f"p{(seed + 1) % 3}-{k}")


def test_concurrent_writers_keep_the_cap_and_a_consistent_index(tmp_path):
    folder, cap = tmp_path / "shared", 200_000
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(3)
    procs = [ctx.Process(target=_fill_in_child, args=(str(folder), cap, s, barrier)) for s in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    cache = FrameCache(folder, cap)
    stats = cache.stats()
    assert 0 < stats["bytes"] <= cap
    indexed = {r[0] for r in sqlite3.connect(folder / "index.sqlite3").execute("SELECT file FROM entries")}
    assert {p.name for p in entry_files(folder)} == indexed
    assert not list((folder / "entries").glob("*/*.tmp"))
