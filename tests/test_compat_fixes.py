"""The plugin-side workarounds for lmms-eval bugs (lmms_eval_plugins/compat/fixes.py, entries frames-*, cache-*, probe-notice)."""

from __future__ import annotations

import base64
import gc
import io

import numpy as np
import pytest
import torch
from PIL import Image

from lmms_eval_plugins.compat import fixes


def grey(value: int, size: int = 56) -> Image.Image:
    return Image.fromarray(np.full((size, size, 3), value, np.uint8))


def test_content_key_tells_pictures_apart_and_ignores_identity():
    assert fixes.content_key(grey(10)) == fixes.content_key(grey(10))
    assert fixes.content_key(grey(10)) != fixes.content_key(grey(20))
    assert fixes.content_key(grey(10, 56)) != fixes.content_key(grey(10, 28))
    assert fixes.content_key("/some/path.png") is None


def test_encoder_cache_hits_only_for_the_same_picture():
    calls = []

    def original(
        image,
        *,
        image_format="PNG",
        convert_rgb=False,
        quality=None,
        copy_if_pil=False,
        cache=None,
        use_path_cache=True,
    ):
        calls.append(cache)
        return f"path:{image}" if isinstance(image, str) else f"enc{np.asarray(image)[0, 0, 0]}"

    encode = fixes.content_keyed_encoder(original)
    cache: dict = {}
    # Temporaries freed right after encoding: the id-keyed cache returned the first one's encoding here.
    got = [encode(grey(v), image_format="PNG", cache=cache) for v in (1, 2, 3, 2)]
    assert got == ["enc1", "enc2", "enc3", "enc2"]
    assert len(calls) == 3 and all(c is None for c in calls)  # the repeat came from the content-keyed cache
    assert encode("/a/path.png", cache=cache) == "path:/a/path.png"
    assert calls[-1] is cache  # paths go to the original with its own (path-keyed) cache
    assert fixes.content_keyed_encoder(encode) is encode  # idempotent


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"return_video_sample_fps": True},
        {"return_video_metadata": True},
        {"return_video_sample_fps": True, "return_video_metadata": True},
    ],
)
def test_fetch_video_padding_is_trimmed_for_frame_lists_in_every_return_shape(kwargs):
    def padded_fetch(ele, **kw):  # what qwen_vl_utils does: pad 5 frames to 6
        n = len(ele["video"]) + len(ele["video"]) % 2
        video = torch.zeros(n, 3, 4, 4)
        out = (video, {"fps": 2.0, "frames_indices": list(range(n))}) if kw.get("return_video_metadata") else video
        return (out, 2.0) if kw.get("return_video_sample_fps") else out

    fetch = fixes.unpadded_fetch_video(padded_fetch)
    out = fetch({"video": [grey(i) for i in range(5)]}, **kwargs)
    if kwargs.get("return_video_sample_fps"):
        out, fps = out
        assert fps == 2.0
    if kwargs.get("return_video_metadata"):
        out, metadata = out
        assert metadata["frames_indices"] == [0, 1, 2, 3, 4]
    assert len(out) == 5


def test_fetch_video_leaves_paths_alone():
    fetch = fixes.unpadded_fetch_video(lambda ele, **kw: torch.zeros(6, 3, 4, 4))
    assert len(fetch({"video": "/a/video.mp4"})) == 6


def _arrived(messages) -> list[int]:
    def value(item):
        data = base64.b64decode(item["image_url"]["url"].split(",", 1)[1])
        return round(float(np.asarray(Image.open(io.BytesIO(data)))[0, 0, 0]) / 10)

    return [value(c) for c in messages[0]["content"] if c["type"] == "image_url"]


def test_lmms_eval_sends_every_frame_once_in_order_after_install():
    from lmms_eval.protocol import ChatMessages

    assert fixes.install()
    frames = [grey(10 * i) for i in range(15)]  # odd count: fetch_video would pad it to 16
    chat = ChatMessages(
        messages=[{"role": "user", "content": [{"type": "video", "url": frames}, {"type": "text", "text": "?"}]}]
    )
    for _ in range(5):  # the id reuse depends on the allocator: try several times
        assert _arrived(chat.to_openai_messages(video_kwargs={"nframes": 15})) == list(range(15))
        gc.collect()


def test_response_cache_neither_stores_nor_serves_failed_requests():
    from lmms_eval.caching.response_cache import ResponseCache

    fixes.install()
    failed = "[LMMS_EVAL_REQUEST_FAILED after 5 retries] Connection error."
    assert not ResponseCache._is_valid_response(failed, "generate_until")
    assert not ResponseCache._is_valid_response("[LMMS_EVAL_BUDGET_EXCEEDED]", "generate_until")
    assert ResponseCache._is_valid_response("Error Step: Step 2", "generate_until")
    assert not ResponseCache._is_valid_response("", "generate_until")  # lmms-eval's own rule still applies

    class Stored:  # a cache whose rows were written before the fix
        rows = {"a": failed, "b": "B"}

        def _lookup(self, key):
            return self.rows.get(key)

    fixes.failure_rejecting_cache(Stored)
    fixes.failure_rejecting_cache(Stored)  # idempotent
    assert Stored()._lookup("a") is None and Stored()._lookup("b") == "B" and Stored()._lookup("c") is None


def test_the_frame_list_probe_notice_is_collapsed_into_one_line(monkeypatch):
    import sys
    import types

    from lmms_eval_plugins.compat import fixes

    lines: list[str] = []
    logger = types.SimpleNamespace(warning=lambda m, *a, **k: lines.append(m), info=lambda m: lines.append("info " + m))
    module = types.ModuleType("fake_chat_model")
    module.eval_logger = logger
    # the module's source must hold the notice: a model class that never logs it is left alone
    monkeypatch.setattr(
        "inspect.getsource",
        lambda m: 'eval_logger.warning(f"Failed to probe video {videos[0]}: {e}, using default nframes")',
    )
    monkeypatch.setitem(sys.modules, "fake_chat_model", module)
    cls = type("FakeQwen", (), {"__module__": "fake_chat_model"})
    fixes.collapse_probe_warnings(cls)
    fixes.collapse_probe_warnings(cls)  # idempotent
    for _ in range(69):
        module.eval_logger.warning(
            "Failed to probe video [<PIL.Image.Image image mode=RGB size=96x72>]: err, using default nframes"
        )
    module.eval_logger.warning(
        "Failed to probe video /data/x.mp4: cannot open, using default nframes"
    )  # a real file: kept
    module.eval_logger.info("other")
    assert lines[0].startswith("lmms-eval-plugins: FakeQwen cannot probe videos given as frame lists")
    assert lines[1:] == ["Failed to probe video /data/x.mp4: cannot open, using default nframes", "info other"]
    assert module.eval_logger.collapsed == 69


def test_lmms_eval_qwen2_5_vl_chat_logs_the_notice_we_collapse():
    import inspect

    from lmms_eval.models.chat import qwen2_5_vl

    from lmms_eval_plugins.compat.fixes import PROBE_NOTICE

    assert PROBE_NOTICE in inspect.getsource(qwen2_5_vl)  # if lmms-eval rewords it, the collapse must follow
