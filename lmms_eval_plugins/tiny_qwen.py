"""Build a tiny, randomly initialised Qwen2.5-VL into a local folder (no network, a few seconds).

The folder holds everything ``Qwen2_5_VLForConditionalGeneration.from_pretrained``,
``AutoProcessor.from_pretrained``, ``AutoTokenizer.from_pretrained`` and ``AutoConfig`` need
(``config.json``, ``generation_config.json``, ``model.safetensors`` in float32, ``tokenizer.json``,
``tokenizer_config.json``, ``chat_template.jinja``, ``processor_config.json``), so lmms-eval's real
``qwen2_5_vl`` model class loads it and runs genuine transformers forward passes on a CPU. Its
answers are noise (random weights, ~0.4 M parameters, 1.6 MB); it exists to exercise the whole
pipeline offline: prompt building from ``doc_to_messages``, qwen_vl_utils, the processor,
``generate`` and decoding. Sizes: text 2 layers x 64 hidden (4 heads, 2 kv heads, mrope [2, 3, 3]),
vision tower 2 blocks x 64 hidden (patch 14, merge 2, temporal patch 2), a byte-level BPE of ~600
tokens trained in-process plus Qwen's special tokens at Qwen's relative order (ids differ from the
real model's: read them from the tokenizer or ``config.json``, never hard-code 151643...).

Build it::

    lmms-eval-plugins tiny-qwen /tmp/tiny-qwen      # prints the folder; or python -m lmms_eval_plugins.tiny_qwen
    build_tiny_qwen2_5_vl("/tmp/tiny-qwen")         # from Python; returns the folder as a Path

A second call on a folder that already holds a complete build of the same builder version and seed
returns at once (tests share one build); ``overwrite=True`` / ``--overwrite`` rebuilds.

Run lmms-eval with it on a CPU (checked with lmms-eval 0.7.3, transformers 5.23, qwen-vl-utils
0.0.14; ``lmms_eval_model_args(folder)`` returns this string)::

    lmms-eval --model qwen2_5_vl \\
        --model_args pretrained=/tmp/tiny-qwen,device=cpu,device_map=cpu,attn_implementation=sdpa,min_pixels=3136,max_pixels=12544 \\
        --tasks ... --limit 2 --gen_kwargs max_new_tokens=8

Why each argument:

- ``device=cpu`` *and* ``device_map=cpu`` are both needed. ``device_map`` places the weights, but
  the class moves the inputs with ``inputs.to(self.device)`` whenever ``device_map != "auto"``, and
  ``device`` defaults to ``"cuda"``: with ``device_map=cpu`` alone, a machine without a GPU fails
  at the first request with ``RuntimeError: Found no NVIDIA driver on your system`` (raised from
  ``inputs.to``). ``device_map=auto`` (the default) sends the inputs to ``"cuda"`` unconditionally,
  so it never works on a CPU. The CLI flag ``--device cpu`` may replace ``device=cpu`` in
  ``--model_args`` but not be combined with it (``TypeError: ...Qwen2_5_VL() got multiple values
  for keyword argument 'device'``).
- ``attn_implementation``: optional; ``sdpa`` (the default it resolves to) and ``eager`` both work
  on a CPU; ``flash_attention_2`` needs CUDA. The class always loads the weights as bfloat16
  (``torch_dtype="bfloat16"`` is hard-coded); bfloat16 runs on a CPU.
- ``min_pixels``/``max_pixels``: optional, but they decide the cost. The class defaults
  (``min_pixels=200704``, ``max_pixels=1605632``) upscale every image and frame to >= 256 visual
  tokens (an image >= 1024 vision patches); ``3136``/``12544`` keep each image, and each pair of
  frames, at 4..16 visual tokens. They are applied twice, by qwen_vl_utils (``fetch_image``,
  ``fetch_video``) and by the processor (``AutoProcessor.from_pretrained(..., min_pixels=,
  max_pixels=)``). ``max_pixels`` must be >= ``min_pixels``: setting only ``max_pixels=12544``
  (below the default ``min_pixels``) fails at the first request with ``AssertionError: The
  max_pixels of image must be greater than or equal to min_pixels.`` With the defaults the model still
  runs (about 0.1-2 s a request here instead of 0.03 s); qwen_vl_utils then logs "The given
  max_pixels[1605632] exceeds limit[602112]" for videos, which is harmless.
- ``max_num_frames``/``fps``: ignored for videos given as frame lists (see below); they only
  limit videos given as file paths.
- ``use_flash_attention_2`` is *not* an argument of this class: unknown keyword arguments fail its
  ``assert kwargs == {}`` ("Unexpected kwargs"). ``system_prompt``, ``interleave_visuals`` and
  ``reasoning_prompt`` only affect the ``simple`` class's path, not the chat class's
  ``doc_to_messages`` path. ``pretrained`` must not contain a comma (the arg string is split on it).

Facts about images and videos in lmms-eval 0.7.3's chat ``qwen2_5_vl`` class with qwen-vl-utils
0.0.14 and transformers 5.23 (checked with this model; ``tests/test_tiny_qwen.py`` pins the main
ones):

- ``generate_until`` returns ``GenerationResult`` objects (``.text`` is the string), not ``str``;
  lmms-eval's evaluator unwraps both.
- It reads the doc as ``self.task_dict[task][split][doc_id]`` and calls ``doc_to_messages(doc)``;
  a hand-built test must set ``model.task_dict = {task: {split: docs}}``.
- A video may be given in ``doc_to_messages`` as ``{"type": "video", "url": [PIL.Image, ...]}`` (a
  tuple works too). qwen_vl_utils then uses *every* frame, in order (no sampling;
  ``nframes``/``fps``/``max_num_frames`` are ignored for frame lists), and pads an odd count to even
  by repeating the last frame: 3 frames -> 4 -> 2 temporal patches (``video_grid_thw[0] == 2``);
  a single frame works too (-> 2 frames, t = 1). Each pair of frames costs
  ``(h / 28) * (w / 28)`` tokens after resizing.
- Several frame-list videos of *different lengths* in one request work, in either order, also
  interleaved with text ("Video 1:", frames, "Video 2:", frames, question), also mixed with images,
  and also with ``batch_size=2``. The class probes only the first video of a request with
  ``decord.VideoReader`` to choose ``nframes``; for a frame list the probe fails with a logged
  warning ("Failed to probe video [...]: Don't know how to handle type <class 'list'>, using default
  nframes"), which is harmless.
- Videos given as *file paths* are different: the first video's probed length (or, when the first
  video is a frame list, ``max_num_frames``, default 32) is applied to every video of the request,
  so a later video with fewer frames fails (decord's ``nframes should in interval [2, N]``; with
  torchvision 0.29, which has no ``io.read_video``, qwen_vl_utils' fallback then raises
  ``AttributeError: module 'torchvision.io' has no attribute 'read_video'``). Don't mix a frame
  list and a path in one request; give all videos as frame lists.
- Every frame must be a ``PIL.Image`` (or a per-frame path/URL/data-URI string). numpy arrays fail
  (``AttributeError: 'numpy.ndarray' object has no attribute 'startswith'``); convert with
  ``Image.fromarray``. Any PIL mode works (RGBA is composited on white, others converted to RGB).
- All frames of one video must have the same size: qwen_vl_utils resizes each frame on its own
  and then ``torch.stack``s them, so frames that resize to different sizes fail with
  ``RuntimeError: stack expects each tensor to be equal size``. Give all frames of a video one size
  in ``doc_to_messages``. (Frames of different videos, and images, may differ.)
- An empty frame list fails (``ValueError: max_workers must be greater than 0``).
- Size: no minimum. 1x1 px images and frames work. Images: ``smart_resize`` rounds each side to a
  multiple of 28 (at least 28), then scales the area into ``[min_pixels, max_pixels]``. Frames of a
  frame-list video: qwen_vl_utils passes 28 as the *patch* size to ``fetch_image``, which doubles
  it, so each side is rounded to a multiple of **56** (at least 56; e.g. 84x56 -> 112x56, 40x30 ->
  56x56) before the same area bounds. The only hard limit is the aspect ratio: ``max(h, w) /
  min(h, w)`` must be < 200 (``ValueError: absolute aspect ratio must be smaller than 200``), for
  images and frames alike.
- transformers 5.23 warns ``FutureWarning: Passing `min_pixels` and `max_pixels` to a processor
  call is deprecated`` on every call: lmms-eval passes them to ``AutoProcessor.from_pretrained``.
  Harmless with 5.23.
- The chat template adds the default system turn ("You are a helpful assistant.") unless the
  messages start with a system message; the class's ``system_prompt`` argument is not used.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from lmms_eval_plugins.safe_files import move_into_place, write_atomic

BUILDER_VERSION = 1
MARKER_NAME = "tiny_qwen_build.json"

# --- sizes ---------------------------------------------------------------------------------------
TEXT_HIDDEN = 64
TEXT_LAYERS = 2
TEXT_HEADS = 4  # head_dim 16 -> rotary half-dim 8 = sum(MROPE_SECTION)
TEXT_KV_HEADS = 2
TEXT_INTERMEDIATE = 128
MROPE_SECTION = [2, 3, 3]
VISION_DEPTH = 2
VISION_HIDDEN = 64
VISION_HEADS = 4
VISION_INTERMEDIATE = 128
PATCH_SIZE = 14
SPATIAL_MERGE_SIZE = 2
TEMPORAL_PATCH_SIZE = 2
WINDOW_SIZE = 112  # in pixels: 8 patches = 4 merged units per side, like the real model
FULLATT_BLOCK_INDEXES = [VISION_DEPTH - 1]
BPE_VOCAB_SIZE = 768  # trained byte-level BPE (256 byte symbols + merges) before the special tokens
# processor defaults saved with the folder (lmms-eval's class overrides them with its own min/max_pixels)
MIN_PIXELS = 4 * 28 * 28
MAX_PIXELS = 16 * 28 * 28

DEFAULT_SYSTEM_PROMPT = "You are a helpful assistant."

# lmms-eval ``--model_args`` that run lmms-eval's ``qwen2_5_vl`` on a CPU (see the module docstring).
LMMS_EVAL_MODEL_ARGS = (
    "pretrained={path},device=cpu,device_map=cpu,attn_implementation=sdpa,min_pixels=3136,max_pixels=12544"
)


def lmms_eval_model_args(path: str | Path) -> str:
    """The ``--model_args`` string for ``lmms-eval --model qwen2_5_vl`` with the build at ``path``."""
    text = str(path)
    if "," in text:
        raise ValueError(f"tiny-qwen: lmms-eval splits --model_args on commas; move the build out of {text!r}")
    return LMMS_EVAL_MODEL_ARGS.format(path=text)


# Qwen2.5-VL's special tokens, in the real model's order (ids follow the trained vocabulary here).
SPECIAL_TOKENS = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
]
# added, non-special tokens of the real tokenizer
EXTRA_TOKENS = [
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
]

# The Qwen2-VL / Qwen2.5-VL-Instruct chat template.
CHAT_TEMPLATE = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\n" + DEFAULT_SYSTEM_PROMPT + "<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}"
    "{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}"
    "{% endif %}"
    "{% endfor %}"
    "<|im_end|>\n"
    "{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

# A small built-in corpus for the BPE merges: English prose, benchmark-ish vocabulary, digits.
_CORPUS = """
You are a helpful assistant. Answer the question about the video or the image.
Video 1: Video 2: Picture 1: Picture 2: Frame 1 Frame 2 Frame 3 Frame 4 at second 0.5
Question: What happens first in the video? Which step comes next? Is there an error in the image?
Answer with the option's letter from the given choices directly. Options: (A) (B) (C) (D) (E)
A. yes B. no C. maybe D. none of the above. The answer is A. The answer is B. The answer is C.
Yes, No, True, False, correct, incorrect, error, mistake, reasoning, step, action, object, person.
The person picks up the cup, opens the door, walks to the table, and puts the book on the shelf.
Describe the scene. Count the objects. Where is the red ball? When does the event start and end?
Give the start and end time in seconds, for example 12.5 - 20.0 seconds. The interval is [3.0, 7.5].
The quick brown fox jumps over the lazy dog. 0 1 2 3 4 5 6 7 8 9 10 11 12 100 2024 3.14 0.25
Please think step by step, then give the final answer in the format: Final answer: X.
JSON {"answer": "A", "score": 1, "reason": "the response matches the reference"} [ ] ( ) : ; , . ! ?
"""


def _corpus_lines() -> list[str]:
    lines = [line for line in _CORPUS.splitlines() if line.strip()]
    return lines * 4


def _build_tokenizer():
    """A byte-level BPE trained in-process, wrapped as transformers' ``Qwen2Tokenizer``."""
    from tokenizers import Regex, Tokenizer, decoders, normalizers, pre_tokenizers
    from tokenizers.models import BPE
    from tokenizers.trainers import BpeTrainer
    from transformers import AddedToken
    from transformers.models.qwen2.tokenization_qwen2 import PRETOKENIZE_REGEX, Qwen2Tokenizer

    # same normaliser / pre-tokeniser as Qwen2Tokenizer, so the merges fit what it will see
    raw = Tokenizer(BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    raw.normalizer = normalizers.NFC()
    raw.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    raw.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=BPE_VOCAB_SIZE,
        min_frequency=2,
        show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        special_tokens=[],
    )
    raw.train_from_iterator(_corpus_lines(), trainer=trainer)
    model_state = json.loads(raw.to_str())["model"]
    vocab: dict[str, int] = model_state["vocab"]
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ")) for m in model_state["merges"]]

    tokenizer = Qwen2Tokenizer(
        vocab=vocab,
        merges=merges,
        unk_token=None,
        bos_token=None,
        eos_token=None,  # set below, once the special tokens have their ids in Qwen's order
        pad_token=None,
        errors="replace",
        model_max_length=32768,
        clean_up_tokenization_spaces=False,
        split_special_tokens=False,
    )
    # special tokens get consecutive ids after the BPE vocabulary, in Qwen's order
    tokenizer.add_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS], special_tokens=True)
    tokenizer.add_tokens([AddedToken(t, special=False, normalized=False) for t in EXTRA_TOKENS])
    tokenizer.eos_token = "<|im_end|>"  # as in Qwen2.5-VL-*-Instruct
    tokenizer.pad_token = "<|endoftext|>"
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def _token_id(tokenizer, token: str) -> int:
    ids = tokenizer.convert_tokens_to_ids([token])
    tid = ids[0]
    if tid is None or tokenizer.convert_ids_to_tokens([tid])[0] != token:
        raise RuntimeError(f"tiny-qwen builder: token {token!r} did not get its own id in the tokenizer")
    return int(tid)


def _build_config(tokenizer):
    from transformers import Qwen2_5_VLConfig

    ids = {t: _token_id(tokenizer, t) for t in SPECIAL_TOKENS}
    n_tokens = len(tokenizer)
    vocab_size = -(-n_tokens // 64) * 64  # round up to a multiple of 64, covering every token id
    text_config = {
        "vocab_size": vocab_size,
        "hidden_size": TEXT_HIDDEN,
        "intermediate_size": TEXT_INTERMEDIATE,
        "num_hidden_layers": TEXT_LAYERS,
        "num_attention_heads": TEXT_HEADS,
        "num_key_value_heads": TEXT_KV_HEADS,
        "hidden_act": "silu",
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "use_cache": True,
        "use_sliding_window": False,
        "max_window_layers": TEXT_LAYERS,
        "attention_dropout": 0.0,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0, "mrope_section": list(MROPE_SECTION)},
        "bos_token_id": ids["<|endoftext|>"],
        "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"],
        "tie_word_embeddings": False,
    }
    vision_config = {
        "depth": VISION_DEPTH,
        "hidden_size": VISION_HIDDEN,
        "hidden_act": "silu",
        "intermediate_size": VISION_INTERMEDIATE,
        "num_heads": VISION_HEADS,
        "in_channels": 3,
        "patch_size": PATCH_SIZE,
        "spatial_merge_size": SPATIAL_MERGE_SIZE,
        "temporal_patch_size": TEMPORAL_PATCH_SIZE,
        "tokens_per_second": 2,
        "window_size": WINDOW_SIZE,
        "out_hidden_size": TEXT_HIDDEN,
        "fullatt_block_indexes": list(FULLATT_BLOCK_INDEXES),
        "initializer_range": 0.02,
    }
    config = Qwen2_5_VLConfig(
        text_config=text_config,
        vision_config=vision_config,
        image_token_id=ids["<|image_pad|>"],
        video_token_id=ids["<|video_pad|>"],
        vision_start_token_id=ids["<|vision_start|>"],
        vision_end_token_id=ids["<|vision_end|>"],
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=ids["<|im_end|>"],
        pad_token_id=ids["<|endoftext|>"],
        tie_word_embeddings=False,
    )
    return config, ids, n_tokens


def _build_processor(tokenizer):
    from transformers import Qwen2_5_VLProcessor, Qwen2VLImageProcessor, Qwen2VLVideoProcessor

    common = {
        "patch_size": PATCH_SIZE,
        "temporal_patch_size": TEMPORAL_PATCH_SIZE,
        "merge_size": SPATIAL_MERGE_SIZE,
        "min_pixels": MIN_PIXELS,
        "max_pixels": MAX_PIXELS,
    }
    image_processor = Qwen2VLImageProcessor(**common)
    # cap_pixels_per_frame=True: qwen-vl-utils' per-frame budget (and silences transformers' warning)
    video_processor = Qwen2VLVideoProcessor(**common, cap_pixels_per_frame=True)
    return Qwen2_5_VLProcessor(
        image_processor=image_processor,
        tokenizer=tokenizer,
        video_processor=video_processor,
        chat_template=CHAT_TEMPLATE,
    )


def _read_marker(folder: Path) -> dict | None:
    try:
        marker = json.loads((folder / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(marker, dict):
        return None
    files = marker.get("files")
    if not isinstance(files, list) or not all((folder / name).is_file() for name in files):
        return None
    return marker


# everything a build writes (a folder holding only these may be replaced by ``overwrite``)
_BUILD_FILES = {
    MARKER_NAME,
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "chat_template.json",
    "processor_config.json",
    "preprocessor_config.json",
    "video_preprocessor_config.json",
    "special_tokens_map.json",
    "vocab.json",
    "merges.txt",
}


def _looks_like_build(folder: Path) -> bool:
    names = {p.name for p in folder.iterdir()}
    return MARKER_NAME in names or names <= _BUILD_FILES


def _is_complete(folder: Path, seed: int) -> bool:
    marker = _read_marker(folder)
    return bool(marker) and marker.get("builder_version") == BUILDER_VERSION and marker.get("seed") == seed


def _build_into(folder: Path, seed: int) -> None:
    import torch
    from transformers import GenerationConfig, Qwen2_5_VLForConditionalGeneration

    tokenizer = _build_tokenizer()
    config, ids, n_tokens = _build_config(tokenizer)
    processor = _build_processor(tokenizer)

    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed)
        model = Qwen2_5_VLForConditionalGeneration(config).to(torch.float32).eval()
    finally:
        torch.random.set_rng_state(state)
    model.generation_config = GenerationConfig(
        bos_token_id=ids["<|endoftext|>"],
        eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
        pad_token_id=ids["<|endoftext|>"],
        do_sample=False,
    )
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    tokenizer.save_pretrained(folder)

    files = sorted(p.name for p in folder.iterdir() if p.is_file())
    for name in files:  # transformers writes the weights 0600; make the build readable like any folder
        os.chmod(folder / name, 0o644)
    os.chmod(folder, 0o755)  # mkdtemp made it 0700
    marker = {
        "builder": "lmms_eval_plugins.tiny_qwen",
        "builder_version": BUILDER_VERSION,
        "seed": seed,
        "vocab_size": config.text_config.vocab_size,
        "num_tokens": n_tokens,
        "token_ids": ids,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "files": files,
    }
    # written last: a folder without it is an unfinished build
    write_atomic(folder / MARKER_NAME, json.dumps(marker, indent=2, sort_keys=True) + "\n")


def build_tiny_qwen2_5_vl(out_dir: str | Path, *, seed: int = 0, overwrite: bool = False) -> Path:
    """Build a tiny random Qwen2.5-VL (weights, config, tokenizer, processor) into ``out_dir``.

    Returns ``out_dir`` as a ``Path``. If it already holds a complete build of this builder version
    with the same seed, it is returned as is, unless ``overwrite``. A non-empty folder holding
    anything else is refused (``FileExistsError``) unless ``overwrite``, which replaces it. The build
    happens in a temporary sibling folder that is renamed into place, so a failed or concurrent build
    never leaves a half-written folder that looks complete.
    """
    out = Path(out_dir).expanduser().absolute()
    if not overwrite and _is_complete(out, seed):
        return out
    if out.exists() and not out.is_dir():
        raise FileExistsError(f"tiny-qwen: {out} exists and is not a folder; pick another OUT_DIR")
    if out.is_dir() and any(out.iterdir()) and overwrite and not _looks_like_build(out):
        raise FileExistsError(
            f"tiny-qwen: {out} holds files that are not a tiny-qwen build; --overwrite only replaces an earlier "
            f"build (a folder with {MARKER_NAME}), never other files. Pick an empty or new folder"
        )
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        marker = _read_marker(out)
        what = (
            f"a tiny-qwen build (builder version {marker.get('builder_version')}, seed {marker.get('seed')})"
            if marker
            else "other files"
        )
        raise FileExistsError(
            f"tiny-qwen: {out} already holds {what}, not a complete build of builder version "
            f"{BUILDER_VERSION} with seed {seed}; pass overwrite=True (--overwrite) or pick an empty folder"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.building-", dir=out.parent))
    try:
        _build_into(tmp, seed)
        if out.exists():
            if not overwrite and _is_complete(out, seed):  # a concurrent build finished first
                return out
            shutil.rmtree(out)
        try:
            move_into_place(tmp, out)
        except OSError:
            if _is_complete(out, seed):  # a concurrent build won the rename
                return out
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins tiny-qwen",
        description="Build a tiny randomly initialised Qwen2.5-VL into OUT_DIR (offline, a few seconds) "
        "and print the folder path. Use it with: lmms-eval --model qwen2_5_vl --model_args "
        + LMMS_EVAL_MODEL_ARGS.format(path="OUT_DIR"),
    )
    parser.add_argument("out_dir", metavar="OUT_DIR", help="folder to write (created if missing)")
    parser.add_argument("--seed", type=int, default=0, help="seed for the random weights (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="rebuild even if OUT_DIR already holds a build")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    start = time.perf_counter()
    try:
        folder = build_tiny_qwen2_5_vl(args.out_dir, seed=args.seed, overwrite=args.overwrite)
    except FileExistsError as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(folder)
    print(f"tiny-qwen: ready in {time.perf_counter() - start:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
