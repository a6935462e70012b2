"""Workarounds for lmms-eval 0.7.3 bugs that change what a served model receives.

Entries ``frames-content-key``, ``frames-unpadded``, ``cache-valid``, ``cache-lookup`` and
``probe-notice`` of :data:`lmms_eval_plugins.compat.ENTRIES`: installed by our ``lmms_eval.models``
entry point (:mod:`lmms_eval_plugins.discovery`) through :func:`lmms_eval_plugins.compat.install_all`,
each after its check passed, so every lmms-eval process that can run our tasks has them. Each patch is
small, idempotent and marked (``compat.MARK``); the upstream fix of 1 and 2 is
``docs/upstream/lmms-eval-openai-frames.patch``, after which these go.

1. **Frames swapped.** ``ChatMessages.to_openai_messages`` (the ``openai``, ``async_openai`` and ``vllm``
   chat classes) turns each frame of a video into a temporary PIL image and base64-encodes it through
   a per-request cache keyed on ``id(image)``. CPython reuses a freed temporary's id for a later frame,
   which is then sent as the earlier frame's picture. We replace the encoder that module calls with
   one whose cache key for a PIL image is its content (mode, size and a BLAKE2 digest of its pixels):
   two frames share an encoding only if they are the same picture.
2. **Frames added.** ``qwen_vl_utils.fetch_video``, which that method calls on a list of frames, pads
   an odd count by repeating the last frame (Qwen's temporal patch of 2): 5 frames sent, 6 arrive.
   The padding exists for a video encoder; an API receives separate images, so for a frame list we
   drop the padded copies and send exactly the frames the task chose. fetch_video's resizing (its
   minimum and total pixel budgets) is the class's own choice and is kept; ``check-model`` reports it.
3. **Failures cached as answers.** With ``--use_cache``, lmms-eval stores any non-empty reply, so the
   API classes' failure marker (``[LMMS_EVAL_REQUEST_FAILED ...]``) was replayed as the model's answer
   on the next run, even with the server back up; its crash-recovery replay of the audit log
   re-inserts such rows too. We never store a failure marker and treat one found in the cache
   (written before this fix) as a miss, so a re-run asks the model again.
4. **A warning per request.** ``qwen2_5_vl`` (chat) probes the first video of every request with decord
   for its frame count; our video tasks give videos as frame lists (the frames the paper's protocol
   chose), which decord cannot open, so each request logged "Failed to probe video [<PIL...>, ...]"
   (69 lines in one run). The probe's fallback is harmless for a frame list (qwen-vl-utils uses the
   frames given), so for frame lists the notice is collapsed into one line per model class.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from lmms_eval_plugins.compat import MARK as _MARK


def content_key(image: Any) -> tuple[object, ...] | None:
    """A cache key that identifies a PIL image by its pixels, or None for anything else."""
    try:
        from PIL import Image
    except ImportError:  # pragma: no cover - PIL ships with lmms-eval
        return None
    if not isinstance(image, Image.Image):
        return None
    digest = hashlib.blake2b(image.tobytes(), digest_size=16).hexdigest()
    return ("pil-content", image.mode, image.size, digest)


def content_keyed_encoder(original: Callable[..., str]) -> Callable[..., str]:
    """Wrap ``encode_image_to_base64`` so its per-request cache is keyed on pixel content for PIL images."""
    if getattr(original, _MARK, False):
        return original

    def encode_image_to_base64(image: Any, *args: Any, cache: Any = None, **kwargs: Any) -> str:
        key = content_key(image) if cache is not None else None
        if key is None:
            return original(image, *args, cache=cache, **kwargs)
        full_key = (*key, kwargs.get("image_format"), kwargs.get("convert_rgb"), kwargs.get("quality"))
        cached = cache.get(full_key)
        if cached is None:
            cached = original(image, *args, cache=None, **kwargs)  # never the id-keyed entry
            cache[full_key] = cached
        return cached

    setattr(encode_image_to_base64, _MARK, True)
    encode_image_to_base64.__wrapped__ = original  # type: ignore[attr-defined]
    return encode_image_to_base64


def _trim(video: Any, count: int) -> Any:
    return video[:count] if len(video) > count else video


def unpadded_fetch_video(original: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``fetch_video`` so a list of frames comes back with as many frames as it went in."""
    if getattr(original, _MARK, False):
        return original

    def fetch_video(ele: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        result = original(ele, *args, **kwargs)
        frames_in = ele.get("video") if isinstance(ele, dict) else None
        if not isinstance(frames_in, (list, tuple)):
            return result  # a path or URL: fetch_video chose the frames itself
        count = len(frames_in)
        # Return shapes: video | (video, fps) | (video, metadata) | ((video, metadata), fps).
        fps_tail: tuple[Any, ...] = ()
        if kwargs.get("return_video_sample_fps"):
            result, fps = result
            fps_tail = (fps,)
        if kwargs.get("return_video_metadata"):
            video, metadata = result
            metadata = dict(metadata)
            if "frames_indices" in metadata:
                metadata["frames_indices"] = list(metadata["frames_indices"])[:count]
            result = (_trim(video, count), metadata)
        else:
            result = _trim(result, count)
        return (result, *fps_tail) if fps_tail else result

    setattr(fetch_video, _MARK, True)
    fetch_video.__wrapped__ = original  # type: ignore[attr-defined]
    return fetch_video


def _cached_reply_text(reply: Any) -> Any:
    return getattr(reply, "text", reply)


def reject_failures_in_validity(cache_cls: type) -> bool:
    """``cache_cls._is_valid_response`` (a staticmethod) also refuses failed-request markers: never stored."""
    from lmms_eval_plugins.outcome import request_failure

    is_valid = cache_cls.__dict__.get("_is_valid_response")
    if not isinstance(is_valid, staticmethod):
        return False
    if getattr(is_valid.__func__, _MARK, False):
        return True
    original_valid = is_valid.__func__

    def _is_valid_response(response: Any, request_type: str) -> bool:
        if request_failure(_cached_reply_text(response)):
            return False
        return original_valid(response, request_type)

    setattr(_is_valid_response, _MARK, True)
    _is_valid_response.__wrapped__ = original_valid  # type: ignore[attr-defined]
    cache_cls._is_valid_response = staticmethod(_is_valid_response)
    return True


def reject_failures_in_lookup(cache_cls: type) -> bool:
    """``cache_cls._lookup`` serves a stored failed-request marker as a miss (a re-run asks again)."""
    from lmms_eval_plugins.outcome import request_failure

    lookup = cache_cls.__dict__.get("_lookup")
    if not callable(lookup):
        return False
    if getattr(lookup, _MARK, False):
        return True
    original_lookup = lookup

    def _lookup(self: Any, cache_key: str) -> Any:
        found = original_lookup(self, cache_key)
        return None if request_failure(_cached_reply_text(found)) else found

    setattr(_lookup, _MARK, True)
    _lookup.__wrapped__ = original_lookup  # type: ignore[attr-defined]
    cache_cls._lookup = _lookup
    return True


def failure_rejecting_cache(cache_cls: type) -> None:
    """Make lmms-eval's ``ResponseCache`` neither store nor serve failed-request markers."""
    reject_failures_in_validity(cache_cls)
    reject_failures_in_lookup(cache_cls)


PROBE_NOTICE = "Failed to probe video"


class _CollapsedProbeWarnings:
    """A stand-in for a model module's logger: the frame-list probe notice once, everything else as is."""

    def __init__(self, logger: Any, model: str) -> None:
        self._logger = logger
        self._model = model
        self.collapsed = 0

    def warning(self, message: Any, *args: Any, **kwargs: Any) -> Any:
        if isinstance(message, str) and message.startswith(PROBE_NOTICE + " [<PIL."):
            self.collapsed += 1
            if self.collapsed > 1:
                return None
            message = (
                f"lmms-eval-plugins: {self._model} cannot probe videos given as frame lists; it uses the "
                "frames as given (the task chose them). This notice is shown once, not per request."
            )
        return self._logger.warning(message, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._logger, name)


def collapse_probe_warnings(model_class: type) -> None:
    """Give ``model_class``'s module the collapsing logger, if it logs the probe notice. Idempotent."""
    import sys

    module = sys.modules.get(getattr(model_class, "__module__", ""))
    logger = getattr(module, "eval_logger", None)
    if module is None or logger is None or isinstance(logger, _CollapsedProbeWarnings):
        return
    try:
        import inspect

        if PROBE_NOTICE not in inspect.getsource(module):
            return
    except (OSError, TypeError):
        return
    module.eval_logger = _CollapsedProbeWarnings(logger, model_class.__name__)


def install_model_hook() -> bool:
    """Wrap ``lmms_eval.models.get_model`` so each model class it resolves gets :func:`collapse_probe_warnings`."""
    import lmms_eval.models as models

    original = models.get_model
    if getattr(original, _MARK, False):
        return True

    def get_model(*args: Any, **kwargs: Any) -> type:
        cls = original(*args, **kwargs)
        try:
            collapse_probe_warnings(cls)
        except Exception:  # a display nicety must never stop a run
            pass
        return cls

    setattr(get_model, _MARK, True)
    get_model.__wrapped__ = original  # type: ignore[attr-defined]
    models.get_model = get_model
    return True


def install_encoder() -> bool:
    """``lmms_eval.protocol.encode_image_to_base64`` keyed on pixel content (idempotent)."""
    import lmms_eval.protocol as protocol

    protocol.encode_image_to_base64 = content_keyed_encoder(protocol.encode_image_to_base64)
    return True


def install_fetch_video() -> bool:
    """``lmms_eval.protocol.fetch_video`` returns as many frames as a frame list had (idempotent)."""
    import lmms_eval.protocol as protocol

    protocol.fetch_video = unpadded_fetch_video(protocol.fetch_video)
    return True


def install_cache_valid() -> bool:
    from lmms_eval.caching.response_cache import ResponseCache

    return reject_failures_in_validity(ResponseCache)


def install_cache_lookup() -> bool:
    from lmms_eval.caching.response_cache import ResponseCache

    return reject_failures_in_lookup(ResponseCache)


def install() -> bool:
    """All five fixes, each through its compatibility check (:func:`lmms_eval_plugins.compat.install`).
    True when the frame fixes (the ones that change what a served model receives) are in place."""
    from lmms_eval_plugins import compat

    applied = {name: compat.install(name) for name in FIX_ENTRIES}
    return applied["frames-content-key"] and applied["frames-unpadded"]


FIX_ENTRIES = ("frames-content-key", "frames-unpadded", "cache-valid", "cache-lookup", "probe-notice")
