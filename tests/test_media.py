"""Frame sampling: hand-computed index math, and decoding checked frame by frame on synthetic videos.

Every synthetic frame draws its own index (lmms_eval_plugins.synthetic), so the tests read back
WHICH frames were decoded instead of trusting the returned indices.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from lmms_eval_plugins.errors import DataError, MediaError
from lmms_eval_plugins.media import (
    SampledFrames,
    VideoRequest,
    as_image_contents,
    as_video_content,
    folder_positions,
    frame_plan,
    intervals_past_end,
    linspace_indices,
    linspace_interval_indices,
    load_image,
    resize_down,
    sample_frame_folder,
    sample_video,
    sample_videos,
    seconds_to_frame_range,
    split_budget,
    uniform_indices,
    video_info,
)
from lmms_eval_plugins.synthetic import decode_frame_index, make_frame_folder, make_video


@pytest.fixture(scope="module")
def videos(tmp_path_factory):
    """A 10 s and a 4 s video at 10 fps: 100 and 40 frames of 160x120."""
    root = tmp_path_factory.mktemp("videos")
    return make_video(root / "long.mp4", seconds=10), make_video(root / "short.mp4", seconds=4, seed=1)


def decoded(sampled: SampledFrames) -> list[int]:
    return [decode_frame_index(frame) for frame in sampled.frames]


# --- uniform_indices: first + floor((2j + 1) * n / (2k)) ---------------------------------------


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ((100, 4), [12, 37, 62, 87]),  # 100//8, 300//8, 500//8, 700//8
        ((10, 3), [1, 5, 8]),  # 10//6, 30//6, 50//6
        ((5, 8), [0, 1, 2, 3, 4]),  # shorter than the budget: every frame once
        ((100, 2, 10, 19), [12, 17]),  # n = 10: 10 + 10//4, 10 + 30//4
        ((100, 2, 19, 10), [12, 17]),  # reversed range
        ((100, 3, 95, 200), [95, 97, 99]),  # clamped to 95..99: n = 5
        ((100, 0), []),
        ((100, -3), []),
        ((0, 4), []),
    ],
)
def test_uniform_indices(args, expected):
    assert uniform_indices(*args) == expected


@given(
    total=st.integers(0, 5000),
    k=st.integers(-5, 300),
    first=st.integers(-100, 6000),
    last=st.none() | st.integers(-100, 6000),
)
def test_uniform_indices_sorted_unique_in_range(total, k, first, last):
    indices = uniform_indices(total, k, first, last)
    assert indices == sorted(set(indices))
    assert all(0 <= i < total for i in indices)
    assert len(indices) <= max(k, 0)


# --- seconds_to_frame_range -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (1.0, 2.0, (10, 20)),
        (2.0, 1.0, (10, 20)),  # reversed
        (0.3, 0.7, (3, 7)),  # 0.3 * 10 is 3.0000000000000004 in floats: still frame 3
        (1.25, 2.0, (13, 20)),  # first timestamp inside the interval
        (1.26, 1.26, (13, 13)),  # zero length: the nearest frame, 12.6 -> 13
        (1.01, 1.07, (10, 10)),  # no timestamp inside: nearest to the midpoint 10.4
        (-5.0, 2.0, (0, 20)),
        (50.0, 60.0, (99, 99)),  # past the end
        (-3.0, -1.0, (0, 0)),  # before the start
    ],
)
def test_seconds_to_frame_range(start, end, expected):
    assert seconds_to_frame_range(start, end, 10, 100) == expected


def test_seconds_to_frame_range_needs_a_video():
    with pytest.raises(ValueError):
        seconds_to_frame_range(0, 1, 0, 100)


@given(
    start=st.floats(-1e4, 1e4),
    end=st.floats(-1e4, 1e4),
    fps=st.floats(0.1, 120),
    total=st.integers(1, 10**5),
)
def test_seconds_to_frame_range_is_a_range_in_the_video(start, end, fps, total):
    first, last = seconds_to_frame_range(start, end, fps, total)
    assert 0 <= first <= last < total


def test_frame_plan():
    assert frame_plan(100, 10, 4, None) == [12, 37, 62, 87]
    # 1 s and 3 s share 8 frames as 2 + 6: frames 10..20 (n = 11) then 50..80 (n = 31), in the given order
    assert frame_plan(100, 10, 8, [(5, 8), (1, 2)]) == [52, 57, 62, 68, 73, 78, 12, 18]
    assert frame_plan(100, 10, 3, [(4.0, 4.0), (2.0, 2.0), (0, 9)]) == [40, 20, 45]  # one frame each


# --- split_budget ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "lengths", "mode", "expected"),
    [
        (10, [1, 1, 1], "equal", [4, 3, 3]),  # remainder to the first
        (128, [5, 1, 9, 2], "equal", [32, 32, 32, 32]),
        (2, [5, 5, 5], "equal", [1, 1, 0]),  # fewer frames than parts
        (10, [3, 2, 1], "proportional", [5, 3, 2]),  # 5, 3.33, 1.67 -> 5, 3, 1 + the leftover to 1.67
        (128, [10, 20, 30], "proportional", [21, 43, 64]),  # 21.33, 42.67, 64
        (10, np.array([3, 2, 1], dtype=np.float32), "proportional", [5, 3, 2]),
        (7, [1, 1, 1, 1], "proportional", [2, 2, 2, 1]),  # equal remainders: earlier parts first
        (10, [1, 0, 9], "proportional", [1, 1, 8]),  # the 0 part takes one from the largest
        (4, [-1, 3], "proportional", [1, 3]),  # negative counts as 0
        (5, [0, 0], "proportional", [3, 2]),  # all zero: equal split, no division by zero
        (0, [1, 2], "proportional", [0, 0]),
        (5, [], "equal", []),
    ],
)
def test_split_budget(total, lengths, mode, expected):
    assert split_budget(total, lengths, mode) == expected


def test_split_budget_rejects_unknown_mode():
    with pytest.raises(ValueError, match="proportional"):
        split_budget(8, [1, 2], "weighted")


@given(
    total=st.integers(0, 1000),
    lengths=st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=12),
    mode=st.sampled_from(["equal", "proportional"]),
)
def test_split_budget_sums_to_total(total, lengths, mode):
    parts = split_budget(total, lengths, mode)
    assert len(parts) == len(lengths)
    assert all(part >= 0 for part in parts)
    if lengths:
        assert sum(parts) == total
    if total >= len(lengths):
        assert all(part >= 1 for part in parts)


# --- resize_down ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("size", "max_side", "expected"),
    [((854, 480), 360, (360, 202)), ((480, 854), 360, (202, 360)), ((1000, 1000), 360, (360, 360))],
)
def test_resize_down_shrinks_keeping_aspect(size, max_side, expected):
    assert resize_down(Image.new("RGB", size), max_side).size == expected


@pytest.mark.parametrize("max_side", [None, 360, 100])
def test_resize_down_never_enlarges(max_side):
    image = Image.new("RGB", (100, 50))
    assert resize_down(image, max_side) is image


# --- sample_video ---------------------------------------------------------------------------------


def test_video_info(videos):
    info = video_info(videos[0])
    assert (info.num_frames, info.fps, info.duration, info.width, info.height) == (100, 10.0, 10.0, 160, 120)


def test_video_info_sees_a_rewritten_file(tmp_path):
    path = make_video(tmp_path / "v.mp4", seconds=2)
    assert video_info(path).num_frames == 20
    make_video(path, seconds=3)
    assert video_info(path).num_frames == 30


def test_sample_video_whole(videos):
    sampled = sample_video(videos[0], 4)
    assert sampled.indices == [12, 37, 62, 87]
    assert decoded(sampled) == [12, 37, 62, 87]
    assert sampled.timestamps == pytest.approx([1.2, 3.7, 6.2, 8.7])
    assert sampled.fps == 10.0 and sampled.path == str(videos[0])
    assert sampled.frame_numbers == sampled.indices and sampled.source_size == (160, 120)
    assert all(frame.mode == "RGB" and frame.size == (160, 120) for frame in sampled.frames)


def test_sample_video_resizes_down_only(videos):
    small = sample_video(videos[0], 4, max_long_side=80)
    assert {frame.size for frame in small.frames} == {(80, 60)}
    assert decoded(small) == [12, 37, 62, 87]
    assert {frame.size for frame in sample_video(videos[0], 2, max_long_side=1000).frames} == {(160, 120)}


def test_sample_video_shorter_than_budget(videos):
    sampled = sample_video(videos[1], 500)
    assert sampled.indices == list(range(40))
    assert decoded(sampled) == list(range(40))


def test_sample_video_interval(videos):
    sampled = sample_video(videos[0], 3, interval=(2.0, 4.0))  # frames 20..40, n = 21
    assert sampled.indices == [23, 30, 37]  # 20 + 21//6, 20 + 63//6, 20 + 105//6
    assert decoded(sampled) == [23, 30, 37]
    assert sampled.timestamps == pytest.approx([2.3, 3.0, 3.7])


def test_sample_video_intervals_split_by_length(videos):
    # 1 s and 3 s of 8 frames -> 2 + 6; frames 10..20 (n = 11) and 50..80 (n = 31)
    sampled = sample_video(videos[0], 8, intervals=[(1, 2), (5, 8)])
    assert sampled.indices == [12, 18, 52, 57, 62, 68, 73, 78]
    assert decoded(sampled) == sampled.indices


def test_sample_video_takes_one_kind_of_interval(videos):
    with pytest.raises(ValueError):
        sample_video(videos[0], 4, interval=(0, 1), intervals=[(2, 3)])


# --- sample_videos --------------------------------------------------------------------------------


def test_sample_videos_equal(videos):
    long, short = sample_videos([VideoRequest(videos[0]), VideoRequest(videos[1])], 8, "equal")
    assert decoded(long) == [12, 37, 62, 87]
    assert decoded(short) == [5, 15, 25, 35]  # 40//8, 120//8, ...


def test_sample_videos_equal_with_a_shorter_later_video(videos):
    long, short = sample_videos([VideoRequest(videos[0]), VideoRequest(videos[1])], 100, "equal", max_long_side=80)
    assert len(long.frames) == 50 and decoded(short) == list(range(40))
    assert {frame.size for frame in long.frames + short.frames} == {(80, 60)}


def test_sample_videos_proportional_by_duration(videos):
    long, short = sample_videos([VideoRequest(videos[0]), VideoRequest(videos[1])], 7, "proportional")  # 10 s : 4 s
    assert decoded(long) == [10, 30, 50, 70, 90]
    assert decoded(short) == [10, 30]


def test_sample_videos_proportional_by_interval(videos):
    requests = [VideoRequest(videos[0], intervals=[(0, 1)]), VideoRequest(videos[1])]  # 1 s : 4 s of 10 frames
    first, second = sample_videos(requests, 10, "proportional")
    assert decoded(first) == [2, 8]  # frames 0..10, n = 11
    assert decoded(second) == [2, 7, 12, 17, 22, 27, 32, 37]


# --- frame folders and images ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def frame_folder(tmp_path_factory):
    """frame_5.jpg, frame_15.jpg, ..., frame_115.jpg: text order would put frame_105 before frame_15."""
    folder = make_frame_folder(tmp_path_factory.mktemp("uav") / "22-1", num_frames=12, start_number=5, step=10)
    (folder / "notes.txt").write_text("not a frame")
    return folder


def test_sample_frame_folder(frame_folder):
    sampled = sample_frame_folder(frame_folder, 3, fps=2.0)
    assert sampled.indices == [2, 6, 10]  # 12//6, 36//6, 60//6
    assert sampled.frame_numbers == [25, 65, 105]
    assert decoded(sampled) == [25, 65, 105]
    assert sampled.timestamps == [1.0, 3.0, 5.0]
    assert sampled.source_size == (160, 120)


def test_sample_frame_folder_resizes(frame_folder):
    sampled = sample_frame_folder(frame_folder, 20, max_long_side=80)
    assert sampled.frame_numbers == list(range(5, 120, 10))
    assert decoded(sampled) == sampled.frame_numbers
    assert {frame.size for frame in sampled.frames} == {(80, 60)}


def test_frame_folder_errors(tmp_path):
    with pytest.raises(MediaError, match="no images"):
        sample_frame_folder(tmp_path, 4, record_id="7")
    Image.new("RGB", (8, 8)).save(tmp_path / "cover.png")
    with pytest.raises(MediaError, match="cover.png"):
        sample_frame_folder(tmp_path, 4, record_id="7")
    with pytest.raises(MediaError, match="frame folder not found"):
        sample_frame_folder(tmp_path / "missing", 4)


def test_load_image(tmp_path):
    Image.new("L", (400, 100), 128).save(tmp_path / "gray.png")
    image = load_image(tmp_path / "gray.png", max_long_side=200)
    assert image.mode == "RGB" and image.size == (200, 50)


def test_chat_contents():
    frames = [Image.new("RGB", (4, 4)) for _ in range(2)]
    assert as_video_content(frames) == {"type": "video", "url": frames}
    assert as_image_contents(frames) == [{"type": "image", "url": frames[0]}, {"type": "image", "url": frames[1]}]


# --- errors name the file, the record and the fix -------------------------------------------------


@pytest.mark.parametrize(
    "call",
    [
        lambda p: sample_video(p, 4, record_id="rec-7"),
        lambda p: video_info(p, record_id="rec-7"),
        lambda p: load_image(p, record_id="rec-7"),
        lambda p: sample_videos([VideoRequest(p, record_id="rec-7")], 4, "proportional"),
    ],
)
def test_missing_file(tmp_path, call):
    path = tmp_path / "videos" / "cook" / "missing.mp4"
    with pytest.raises(MediaError, match="not found") as error:
        call(path)
    message = str(error.value)
    assert str(path) in message and "record: rec-7" in message and "fix:" in message
    assert isinstance(error.value, DataError) and error.value.path == str(path)


@pytest.mark.parametrize(
    "call",
    [
        lambda p: sample_video(p, 4, record_id="rec-7"),
        lambda p: video_info(p, record_id="rec-7"),
        lambda p: load_image(p, record_id="rec-7"),
    ],
)
def test_unreadable_file(tmp_path, call):
    path = tmp_path / "garbage.mp4"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(MediaError, match="cannot decode") as error:
        call(path)
    message = str(error.value)
    assert str(path) in message and "record: rec-7" in message and "fix:" in message


def test_sizes_decords_scaler_rejects_fall_back_to_pil(tmp_path):
    # decord fails to scale 96x72 to 48x36 while decoding ("from_size == to_size"); the sampler must not.
    path = make_video(tmp_path / "v.mp4", seconds=3, fps=4, width=96, height=72)
    sampled = sample_video(path, 4, max_long_side=48)
    assert [f.size for f in sampled.frames] == [(48, 36)] * 4
    assert [decode_frame_index(f) for f in sampled.frames] == sampled.indices


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_images_are_named_errors_even_when_lmms_eval_allows_them(tmp_path, monkeypatch, fmt):
    from PIL import ImageFile

    from lmms_eval_plugins.media import load_image

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # what lmms-eval's task module sets for the process
    path = tmp_path / f"cut.{fmt.lower()}"
    noise = np.random.default_rng(0).integers(0, 256, (64, 64, 3), dtype=np.uint8)
    Image.fromarray(noise).save(path, fmt)
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])  # cut in half: the header still reads
    with pytest.raises(MediaError, match="cannot decode image") as err:
        load_image(path, record_id="q7")
    assert "q7" in str(err.value) and str(path) in str(err.value)
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # the process-wide flag is left as it was


def test_images_above_the_pixel_limit_are_refused_before_decoding(tmp_path, monkeypatch):
    from lmms_eval_plugins.media import load_image

    path = tmp_path / "big.png"
    Image.new("RGB", (40, 30)).save(path)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_MAX_IMAGE_PIXELS", "1000")
    with pytest.raises(MediaError, match="40 x 30 pixels, above the limit of 1,000") as err:
        load_image(path, record_id="q1")
    assert "LMMS_EVAL_PLUGINS_MAX_IMAGE_PIXELS" in str(err.value)
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_MAX_IMAGE_PIXELS", "1200")
    assert load_image(path).size == (40, 30)
    # PIL's own bomb guard (a lower Image.MAX_IMAGE_PIXELS) is a named error too, not a bare exception
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100)
    with pytest.raises(MediaError, match="cannot decode image"):
        load_image(path, record_id="q1")


# --- the linspace rule: np.linspace(0, n - 1, k) floored; intervals by a linspace in time --------------


@pytest.mark.parametrize(
    "args, expected",
    [
        ((10, 4), [0, 3, 6, 9]),  # 0, 3, 6, 9 exactly
        ((100, 4), [0, 33, 66, 99]),  # 0, 33, 66, 99
        ((6, 3), [0, 2, 5]),  # 0, 2.5, 5
        ((24, 8), [0, 3, 6, 9, 13, 16, 19, 23]),  # step 23/7 = 3.29: 0, 3.29, 6.57, 9.86, 13.14, 16.43, 19.71, 23
        ((3, 5), [0, 1, 2]),  # n < k: every frame once
        ((5, 5), [0, 1, 2, 3, 4]),
        ((100, 1), [0]),  # one frame: the first
        ((10, 0), []),
        ((0, 4), []),
    ],
)
def test_linspace_indices(args, expected):
    assert linspace_indices(*args) == expected


@pytest.mark.parametrize(
    "total, fps, intervals, k, expected",
    [
        (100, 10, [(2, 4)], 5, [20, 25, 30, 35, 40]),  # times 2, 2.5, 3, 3.5, 4 s
        # pieces end to end: 2 s + 1.5 s; virtual times 0, 0.5, ..., 3.5 -> 0, .5, 1, 1.5 | 3, 3.5, 4, 4.5 s
        (100, 10, [(0, 2), (3, 4.5)], 8, [0, 5, 10, 15, 30, 35, 40, 45]),
        (100, 10, [(8, 12)], 3, [80]),  # 8, 10, 12 s -> clamped to 10 s -> frames 80, 100, 100: 100 is past the end
        (100, 10, [(8, 12)], 1, [80]),  # one frame: the start
        (100, 10, [(5, 5)], 3, []),  # no piece with start < end
        (100, 10, [(6, 5), (1, 2)], 2, [10, 20]),  # the reversed piece is ignored
        (100, 10, [(5, 6), (1, 2)], 4, [13, 20, 50, 56]),  # 5, 5.67 | 1.33, 2 s: sorted, not in piece order
        (40, 10, [(0, 0.2)], 5, [0, 1, 2]),  # 0, .05, .1, .15, .2 s -> 0, 0, 1, 1, 2: repeats removed
    ],
)
def test_linspace_interval_indices(total, fps, intervals, k, expected):
    assert linspace_interval_indices(total, fps, intervals, k) == expected


def test_frame_plan_and_folder_positions_take_the_rule():
    assert frame_plan(100, 10, 4, None) == [12, 37, 62, 87]  # the default is unchanged
    assert frame_plan(100, 10, 4, None, "linspace") == [0, 33, 66, 99]
    # the intervals are one group under the linspace rule: 3 s + 1 s, virtual times 0, 1.33, 2.67, 4 ->
    # 5, 6.33, 7.67 s | 2 s (the end of the last piece) -> frames 50, 63, 76, 20, sorted
    assert frame_plan(100, 10, 4, [(5, 8), (1, 2)], "linspace") == [20, 50, 63, 76]
    assert folder_positions(12, 3) == [2, 6, 10] and folder_positions(12, 3, "linspace") == [0, 5, 11]
    with pytest.raises(ValueError, match="index_rule"):
        frame_plan(100, 10, 4, None, "middle")


def test_sample_video_and_folder_with_the_linspace_rule(videos, frame_folder):
    whole = sample_video(videos[0], 4, index_rule="linspace")
    assert whole.indices == decoded(whole) == [0, 33, 66, 99]
    assert whole.timestamps == pytest.approx([0.0, 3.3, 6.6, 9.9])
    part = sample_video(videos[0], 5, interval=(2.0, 4.0), index_rule="linspace")
    assert part.indices == decoded(part) == [20, 25, 30, 35, 40]
    folder = sample_frame_folder(frame_folder, 3, index_rule="linspace")
    assert folder.indices == [0, 5, 11] and decoded(folder) == folder.frame_numbers == [5, 55, 115]


def test_the_frame_cache_keeps_the_rules_apart(videos, frame_folder, tmp_path, monkeypatch):
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_FRAME_CACHE", str(tmp_path / "cache"))
    for _ in range(2):  # the second round is served from the cache
        centre, lin = sample_video(videos[0], 4), sample_video(videos[0], 4, index_rule="linspace")
        assert decoded(centre) == centre.indices == [12, 37, 62, 87]
        assert decoded(lin) == lin.indices == [0, 33, 66, 99]
        centre, lin = sample_frame_folder(frame_folder, 3), sample_frame_folder(frame_folder, 3, index_rule="linspace")
        assert decoded(centre) == [25, 65, 105] and decoded(lin) == [5, 55, 115]


def test_intervals_past_the_end_by_hand():
    # 10 s video, 1 s tolerance: starting at 10 is past; ending at 11 is allowed, at 11.5 not.
    intervals = [(0, 10), (9, 11), (10, 10.5), (2, 11.5), (3.0, 4.0)]
    assert intervals_past_end(intervals, 10.0) == [2, 3]
    assert intervals_past_end(intervals, 10.0, tolerance=2.0) == [2]
    assert intervals_past_end([], 10.0) == []


# --- hostile files (issue 27): every decoder error is a named MediaError; frames have a pixel cap -----------


def ztxt_bomb(path, chunks: int = 70, size: int = 1_000_000):
    """A valid 8x8 PNG carrying ``chunks`` zTXt chunks of ``size`` zero bytes each (about 1 KB apiece on disk):
    PIL refuses more than 64 MB of text with a bare ``ValueError``."""
    import struct
    import zlib

    Image.new("RGB", (8, 8)).save(path)
    raw = path.read_bytes()
    body = b"Comment\0\0" + zlib.compress(b"\0" * size, 9)
    chunk = struct.pack(">I", len(body)) + b"zTXt" + body + struct.pack(">I", zlib.crc32(b"zTXt" + body))
    ihdr_end = 8 + 8 + 13 + 4  # signature, IHDR length+type, IHDR data, CRC
    path.write_bytes(raw[:ihdr_end] + chunk * chunks + raw[ihdr_end:])
    return path


def test_a_png_with_too_much_text_is_a_named_error_not_a_bare_value_error(tmp_path):
    path = ztxt_bomb(tmp_path / "ztxt.png")
    assert path.stat().st_size < 200_000
    with pytest.raises(MediaError, match="cannot decode image") as err:
        load_image(path, record_id="q7")
    assert err.value.record == "q7" and str(path) in str(err.value)


@pytest.mark.parametrize(
    "raised",
    [
        ValueError("Too much memory used in text chunks"),
        SyntaxError("not a PNG"),
        EOFError(),
        IndexError("tuple index out of range"),
        Image.DecompressionBombError("bomb"),
    ],
)
def test_every_decoder_error_type_is_a_named_media_error(tmp_path, monkeypatch, raised):
    import struct

    path = tmp_path / "a.png"
    Image.new("RGB", (4, 4)).save(path)
    monkeypatch.setattr(Image.Image, "load", lambda self: (_ for _ in ()).throw(raised))
    with pytest.raises(MediaError, match="cannot decode image"):
        load_image(path, record_id="q1")
    monkeypatch.setattr(Image.Image, "load", lambda self: (_ for _ in ()).throw(struct.error("unpack requires")))
    with pytest.raises(MediaError, match="cannot decode image"):
        load_image(path, record_id="q1")


def test_with_skipping_on_an_unreadable_file_is_a_placeholder_and_its_sample_is_left_out(tmp_path, monkeypatch):
    from lmms_eval_plugins import outcome, run_state

    bad = ztxt_bomb(tmp_path / "bad.png")
    folder = tmp_path / "frames"
    folder.mkdir()
    (folder / "000001.jpg").write_bytes(b"not a jpeg")
    run_state.begin_run()  # a fresh run: nothing noted yet
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA", "1")
    image = load_image(bad, record_id="q7")
    assert image.size == (32, 32) and image.mode == "RGB"
    (tmp_path / "garbage.mp4").write_bytes(b"not a video")
    video = sample_video(tmp_path / "garbage.mp4", 8, record_id="v1")
    assert len(video.frames) == 2 and video.frames[0].size == (32, 32)
    assert len(sample_frame_folder(folder, 4, record_id="f1").frames) == 2
    # the doc that names the file is skipped in every metric; a doc with the same id but other media is not
    doc = {"question_id": "q7", "image_path": str(bad), "skipped_records": []}
    out = outcome.with_unscored({"acc": {"correct": True}}, ["reply"], doc=doc)
    assert outcome.is_media_skipped(out["acc"]) and out["unscored"] == {"unscored": None}
    assert outcome.skipped_counts([out["skipped"]]) == {"unreadable media": 1}
    other = outcome.with_unscored(
        {"acc": {"correct": True}}, ["reply"], doc={**doc, "image_path": str(tmp_path / "ok.png")}
    )
    assert not outcome.is_media_skipped(other["acc"])
    nested = {"record": "v1", "media": [{"path": str(tmp_path / "garbage.mp4")}]}
    assert outcome.unreadable_media_of(nested) == outcome.unreadable_media_of(
        {**nested, "media": json.dumps(nested["media"])}
    )
    assert outcome.unreadable_media_of(nested) == f"v1|{tmp_path / 'garbage.mp4'}"
    assert outcome.unreadable_media_of({**nested, "record": "v2"}) is None  # another record naming the same file
    # skipping off: a named error, as before
    monkeypatch.delenv("LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA")
    with pytest.raises(MediaError) as err:
        load_image(bad, record_id="q7")
    assert err.value.record == "q7"


def test_guarded_aggregations_leave_skipped_items_out_and_counts_add_them_once():
    from lmms_eval_plugins import outcome

    mean = outcome.guard(lambda items: sum(i["correct"] for i in items) / len(items))
    skipped = {"correct": False, outcome.MEDIA_SKIP_FIELD: "unreadable media", "skipped_key": "q1|a.png"}
    # by hand: (1 + 0 + 1) / 3 without the skipped item; the skipped one would make it 2 / 4
    assert mean([{"correct": 1}, {"correct": 0}, skipped, {"correct": 1}]) == pytest.approx(2 / 3)
    assert mean([skipped]) is None  # nothing left to aggregate: null, never an exception
    stamp = {"skipped_records": [{"reason": "missing media", "count": 2}]}
    items = [stamp, {**stamp, **skipped}, {**stamp, **skipped}, {**stamp, **skipped, "skipped_key": "q2|b.png"}]
    assert outcome.agg_skipped_by_reason(items) == {"missing media": 2, "unreadable media": 2}
    assert outcome.agg_skipped(items) == 4
    assert outcome.guard(outcome.agg_skipped) is outcome.agg_skipped


def avi_of(path, width: int, height: int, frames: int = 2):
    """A tiny MJPEG AVI of black frames (PyAV)."""
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mjpeg", rate=4)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuvj420p"
        for _ in range(frames):
            frame = av.VideoFrame.from_ndarray(np.zeros((height, width, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame.reformat(format="yuvj420p")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def test_video_frames_above_the_pixel_cap_are_refused_before_decoding(tmp_path, monkeypatch):
    from lmms_eval_plugins import media

    path = avi_of(tmp_path / "wide.avi", 320, 240)
    assert media.video_header_size(path) == (320, 240)
    monkeypatch.setenv(media.MAX_VIDEO_PIXELS_ENV, "70000")
    opened = []
    monkeypatch.setattr(media, "_reader", lambda *a, **k: opened.append(a) or pytest.fail("decord opened the file"))
    for call in (lambda: video_info(path, "v9"), lambda: sample_video(path, 2, record_id="v9")):
        with pytest.raises(MediaError, match="320 x 240 pixels, above the limit of 70,000") as err:
            call()
        assert err.value.record == "v9" and media.MAX_VIDEO_PIXELS_ENV in err.value.fix
    assert not opened
    monkeypatch.undo()
    monkeypatch.setenv(media.MAX_VIDEO_PIXELS_ENV, "76800")
    assert video_info(path).width == 320
    monkeypatch.setenv(media.MAX_VIDEO_PIXELS_ENV, "many")
    with pytest.raises(MediaError, match=media.MAX_VIDEO_PIXELS_ENV):
        media.max_video_pixels()
