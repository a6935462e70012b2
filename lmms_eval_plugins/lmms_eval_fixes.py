"""Workarounds for lmms-eval 0.7.3 bugs that change what a served model receives.

Installed by our ``lmms_eval.models`` entry point (:mod:`lmms_eval_plugins.discovery`), so every
lmms-eval process that can run our tasks has them. Each patch is small, idempotent and marked; the
upstream fix is ``docs/upstream/lmms-eval-openai-frames.patch``, after which these go.

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

_MARK = "_lmms_eval_plugins_fix"


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


def failure_rejecting_cache(cache_cls: type) -> None:
    """Make lmms-eval's ``ResponseCache`` neither store nor serve failed-request markers."""
    from lmms_eval_plugins.outcome import request_failure

    is_valid = cache_cls.__dict__.get("_is_valid_response")
    if isinstance(is_valid, staticmethod) and not getattr(is_valid.__func__, _MARK, False):
        original_valid = is_valid.__func__

        def _is_valid_response(response: Any, request_type: str) -> bool:
            if request_failure(_cached_reply_text(response)):
                return False
            return original_valid(response, request_type)

        setattr(_is_valid_response, _MARK, True)
        cache_cls._is_valid_response = staticmethod(_is_valid_response)

    lookup = cache_cls.__dict__.get("_lookup")
    if callable(lookup) and not getattr(lookup, _MARK, False):
        original_lookup = lookup

        def _lookup(self: Any, cache_key: str) -> Any:
            found = original_lookup(self, cache_key)
            return None if request_failure(_cached_reply_text(found)) else found

        setattr(_lookup, _MARK, True)
        cache_cls._lookup = _lookup


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
            message = (f"lmms-eval-plugins: {self._model} cannot probe videos given as frame lists; it uses the "
                       "frames as given (the task chose them). This notice is shown once, not per request.")
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
    try:
        import lmms_eval.models as models
    except ImportError:
        return False
    original = getattr(models, "get_model", None)
    if not callable(original) or getattr(original, _MARK, False):
        return callable(original)

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


def install() -> bool:
    """Patch ``lmms_eval.protocol`` (idempotent). False when lmms-eval's layout is not the one we know."""
    try:
        import lmms_eval.protocol as protocol
    except ImportError:
        return False
    patched = False
    encoder = getattr(protocol, "encode_image_to_base64", None)
    if callable(encoder):
        protocol.encode_image_to_base64 = content_keyed_encoder(encoder)
        patched = True
    fetch = getattr(protocol, "fetch_video", None)
    if callable(fetch):
        protocol.fetch_video = unpadded_fetch_video(fetch)
    try:
        from lmms_eval.caching.response_cache import ResponseCache
    except ImportError:
        return patched
    failure_rejecting_cache(ResponseCache)
    return patched
