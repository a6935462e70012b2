"""The tiny Qwen2.5-VL builder, end to end: build, offline load, and lmms-eval's real chat class.

One build per session (the ``tiny_qwen_dir`` fixture in conftest.py); one lmms-eval model per module.
The lmms-eval tests also pin the frame/video facts documented in ``lmms_eval_plugins.tiny_qwen``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("qwen_vl_utils")
pytest.importorskip("decord")
pytest.importorskip("lmms_eval")

from PIL import Image

from lmms_eval_plugins import tiny_qwen
from lmms_eval_plugins.tiny_qwen import (
    BUILDER_VERSION,
    MARKER_NAME,
    build_tiny_qwen2_5_vl,
    lmms_eval_model_args,
)

EXPECTED_FILES = {
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "chat_template.jinja",
    "processor_config.json",
    MARKER_NAME,
}


def frames(n: int, width: int = 56, height: int = 56, shade: int = 0) -> list[Image.Image]:
    return [Image.new("RGB", (width, height), ((shade + 37 * i) % 256, (11 * i) % 256, 128)) for i in range(n)]


# ---------------------------------------------------------------------------------------------------
# the builder


def test_build_is_fast_deterministic_and_complete(tiny_qwen_dir: Path, tmp_path: Path) -> None:
    start = time.perf_counter()
    fresh = build_tiny_qwen2_5_vl(tmp_path / "fresh", seed=0)
    elapsed = time.perf_counter() - start
    assert elapsed < 30, f"build took {elapsed:.1f} s"
    assert fresh == (tmp_path / "fresh").absolute()
    assert EXPECTED_FILES <= {p.name for p in fresh.iterdir()}
    # no temporary build folder left behind
    assert [p.name for p in tmp_path.iterdir()] == ["fresh"]
    # same builder version and seed -> byte-identical weights and tokenizer
    for name in ("model.safetensors", "tokenizer.json", "config.json"):
        assert (fresh / name).read_bytes() == (tiny_qwen_dir / name).read_bytes(), name
    size = sum(p.stat().st_size for p in fresh.iterdir())
    assert size < 5_000_000, f"the tiny model should be a few MB, got {size} bytes"


def test_config_matches_tokenizer(tiny_qwen_dir: Path) -> None:
    from transformers import AutoTokenizer, Qwen2_5_VLConfig

    config = Qwen2_5_VLConfig.from_pretrained(tiny_qwen_dir)
    tok = AutoTokenizer.from_pretrained(tiny_qwen_dir)
    ids = tok.convert_tokens_to_ids
    assert config.image_token_id == ids("<|image_pad|>")
    assert config.video_token_id == ids("<|video_pad|>")
    assert config.vision_start_token_id == ids("<|vision_start|>")
    assert config.vision_end_token_id == ids("<|vision_end|>")
    assert tok.eos_token == "<|im_end|>" and config.text_config.eos_token_id == tok.eos_token_id
    assert tok.pad_token == "<|endoftext|>" and config.text_config.pad_token_id == tok.pad_token_id
    assert len(tok) <= config.text_config.vocab_size <= 2048
    assert config.vision_config.out_hidden_size == config.text_config.hidden_size
    head_dim = config.text_config.hidden_size // config.text_config.num_attention_heads
    assert sum(config.text_config.rope_parameters["mrope_section"]) * 2 == head_dim
    assert all(i < config.vision_config.depth for i in config.vision_config.fullatt_block_indexes)
    gen = json.loads((tiny_qwen_dir / "generation_config.json").read_text())
    assert gen["eos_token_id"] == [tok.eos_token_id, tok.pad_token_id] and gen["pad_token_id"] == tok.pad_token_id
    marker = json.loads((tiny_qwen_dir / MARKER_NAME).read_text())
    assert marker["builder_version"] == BUILDER_VERSION and marker["seed"] == 0


def test_tokenizer_round_trip_and_chat_template(tiny_qwen_dir: Path) -> None:
    from transformers import AutoProcessor

    processor = AutoProcessor.from_pretrained(tiny_qwen_dir)
    tok = processor.tokenizer
    text = "Video 1: the person opens the door. Answer: (B) 12.5 seconds! ünïcødé 漢字"
    assert tok.decode(tok.encode(text)) == text
    # special tokens are single tokens, also inside text
    ids = tok.encode("<|vision_start|><|video_pad|><|vision_end|>")
    assert tok.convert_ids_to_tokens(ids) == ["<|vision_start|>", "<|video_pad|>", "<|vision_end|>"]
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Video 1:"},
                {"type": "video", "video": "x"},
                {"type": "image", "image": "y"},
                {"type": "text", "text": "Same?"},
            ],
        }
    ]
    rendered = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert rendered == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nVideo 1:<|vision_start|><|video_pad|><|vision_end|>"
        "<|vision_start|><|image_pad|><|vision_end|>Same?<|im_end|>\n"
        "<|im_start|>assistant\n"
    )
    with_system = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert tok.apply_chat_template(with_system, tokenize=False) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    )


def test_existing_build_is_reused_and_foreign_folders_refused(tiny_qwen_dir: Path, tmp_path: Path) -> None:
    marker = tiny_qwen_dir / MARKER_NAME
    before = marker.stat().st_mtime_ns
    start = time.perf_counter()
    assert build_tiny_qwen2_5_vl(tiny_qwen_dir) == tiny_qwen_dir
    assert time.perf_counter() - start < 1.0
    assert marker.stat().st_mtime_ns == before

    with pytest.raises(FileExistsError, match="seed 0"):
        build_tiny_qwen2_5_vl(tiny_qwen_dir, seed=1)  # a different build is not silently replaced
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="overwrite"):
        build_tiny_qwen2_5_vl(foreign)
    with pytest.raises(FileExistsError, match="not a tiny-qwen build"):
        build_tiny_qwen2_5_vl(foreign, overwrite=True)  # overwrite never deletes other files
    assert (foreign / "notes.txt").read_text() == "mine"
    # an unfinished build (no marker) is not taken for a complete one
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "config.json").write_text("{}")
    with pytest.raises(FileExistsError):
        build_tiny_qwen2_5_vl(partial)
    assert build_tiny_qwen2_5_vl(partial, overwrite=True) == partial.absolute()
    assert (partial / MARKER_NAME).is_file() and (partial / "model.safetensors").is_file()


def test_cli_prints_the_folder(tiny_qwen_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from lmms_eval_plugins import cli

    assert cli.main(["tiny-qwen", str(tiny_qwen_dir)]) == 0  # reuses the build
    assert capsys.readouterr().out.strip() == str(tiny_qwen_dir)
    assert tiny_qwen.main([str(tiny_qwen_dir), "--seed", "3"]) == 1  # refuses to replace a seed-0 build
    assert "overwrite" in capsys.readouterr().err


def test_model_args_string() -> None:
    args = lmms_eval_model_args("/tmp/some model")
    assert args.startswith("pretrained=/tmp/some model,") and "device=cpu" in args and "device_map=cpu" in args
    with pytest.raises(ValueError, match="comma"):
        lmms_eval_model_args("/tmp/a,b")


OFFLINE_SCRIPT = textwrap.dedent(
    """
    import json, sys, torch
    from PIL import Image
    from transformers import AutoConfig, AutoProcessor, AutoTokenizer, Qwen2_5_VLForConditionalGeneration
    folder = sys.argv[1]
    config = AutoConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    processor = AutoProcessor.from_pretrained(folder)
    model = Qwen2_5_VLForConditionalGeneration.from_pretrained(folder, device_map="cpu").eval()
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "and"},
                                              {"type": "video"}, {"type": "text", "text": "What?"}]}]
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    image = Image.new("RGB", (60, 45), (200, 10, 10))
    video = [Image.new("RGB", (56, 56), (i * 40, 0, 0)) for i in range(3)]
    inputs = processor(text=[text], images=[image], videos=[video], return_tensors="pt")
    with torch.no_grad():
        logits = model(**inputs).logits
        out = model.generate(**inputs, max_new_tokens=4, do_sample=False)
    print(json.dumps({
        "model_type": config.model_type,
        "tokenizer_class": type(tokenizer).__name__,
        "processor_class": type(processor).__name__,
        "video_processor_class": type(processor.video_processor).__name__,
        "dtype": str(model.dtype),
        "logits_shape": list(logits.shape),
        "finite": bool(torch.isfinite(logits).all()),
        "new_tokens": int(out.shape[1] - inputs["input_ids"].shape[1]),
        "video_grid_thw": inputs["video_grid_thw"].tolist(),
    }))
    """
)


def test_loads_and_runs_with_transformers_offline(tiny_qwen_dir: Path, tmp_path: Path) -> None:
    env = dict(os.environ)
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_HOME=str(tmp_path / "hf-home"),  # an empty cache: nothing can come from a previous download
        HTTP_PROXY="http://127.0.0.1:9",  # and any network attempt would fail
        HTTPS_PROXY="http://127.0.0.1:9",
        NO_PROXY="",
        TOKENIZERS_PARALLELISM="false",
    )
    proc = subprocess.run(  # noqa: PLW1510 (the return code is asserted below)
        [sys.executable, "-c", OFFLINE_SCRIPT, str(tiny_qwen_dir)],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["model_type"] == "qwen2_5_vl"
    assert result["tokenizer_class"] == "Qwen2Tokenizer"
    assert result["processor_class"] == "Qwen2_5_VLProcessor"
    assert result["video_processor_class"] == "Qwen2VLVideoProcessor"
    assert result["dtype"] == "torch.float32"
    assert result["finite"] and result["new_tokens"] >= 1
    assert result["video_grid_thw"] == [[2, 4, 4]]  # 3 frames padded to 4 -> 2 temporal patches


# ---------------------------------------------------------------------------------------------------
# lmms-eval's real chat class


@pytest.fixture(scope="module")
def lmms_model(tiny_qwen_dir: Path):
    from lmms_eval.models.chat.qwen2_5_vl import Qwen2_5_VL

    # exactly what `lmms-eval --model qwen2_5_vl --model_args ...` does with the documented string
    model = Qwen2_5_VL.create_from_arg_string(lmms_eval_model_args(tiny_qwen_dir), {"batch_size": 1})
    assert str(model.model.device) == "cpu"
    return model


class Captured:
    """Records the processor outputs that reach ``model.generate`` (one dict per batch)."""

    def __init__(self, lmms_model, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[dict] = []
        hf_model = lmms_model.model
        original = hf_model.generate

        def generate(**inputs):
            self.calls.append(
                {
                    "input_ids": inputs["input_ids"],
                    "image_grid_thw": _as_list(inputs.get("image_grid_thw")),
                    "video_grid_thw": _as_list(inputs.get("video_grid_thw")),
                }
            )
            return original(**inputs)

        monkeypatch.setattr(hf_model, "generate", generate)


def _as_list(value):
    return None if value is None else value.tolist()


def run_requests(lmms_model, docs: list[list[dict]], *, max_new_tokens: int = 8, batch_size: int = 1):
    from lmms_eval.api.instance import Instance

    def doc_to_messages(doc):
        return doc

    lmms_model.task_dict = {"tiny_qwen_test": {"test": docs}}
    lmms_model.batch_size_per_gpu = batch_size
    requests = [
        Instance(
            request_type="generate_until",
            arguments=(
                "unused context",
                doc_to_messages,
                {"max_new_tokens": max_new_tokens},
                doc_id,
                "tiny_qwen_test",
                "test",
            ),
            idx=0,
            metadata={"task": "tiny_qwen_test", "doc_id": doc_id, "repeats": 1},
        )
        for doc_id in range(len(docs))
    ]
    try:
        return lmms_model.generate_until(requests)
    finally:
        lmms_model.batch_size_per_gpu = 1


def user(*content: dict) -> list[dict]:
    return [{"role": "user", "content": list(content)}]


def text(value: str) -> dict:
    return {"type": "text", "text": value}


def video(frame_list) -> dict:
    return {"type": "video", "url": frame_list}


def image(img: Image.Image) -> dict:
    return {"type": "image", "url": img}


def test_generate_until_image_interleaved_videos_and_odd_frames(lmms_model, monkeypatch) -> None:
    from lmms_eval.api.instance import GenerationResult

    captured = Captured(lmms_model, monkeypatch)
    docs = [
        # (a) text + one image
        user(text("What is in the picture?"), image(Image.new("RGB", (64, 48), (10, 200, 30)))),
        # (b) two frame-list videos of different lengths, interleaved with text
        user(
            text("Video 1:"),
            video(frames(6)),
            text("Video 2:"),
            video(frames(2, 84, 56, shade=90)),
            text("Same action?"),
        ),
        # (c) one video of 3 frames (odd count)
        user(video(frames(3, 40, 30)), text("What happens?")),
    ]
    start = time.perf_counter()
    results = run_requests(lmms_model, docs, max_new_tokens=8)
    elapsed = time.perf_counter() - start
    assert elapsed < 20, f"generation took {elapsed:.1f} s"
    assert len(results) == 3
    for result in results:
        assert isinstance(result, GenerationResult) and isinstance(result.text, str)
        assert 1 <= result.token_counts.output_tokens <= 8
    by_ids = {len(call["input_ids"][0]): call for call in captured.calls}
    assert len(captured.calls) == 3 and len(by_ids) == 3
    grids = [(call["image_grid_thw"], call["video_grid_thw"]) for call in captured.calls]
    # every frame is used: 6 frames -> t=3; 2 frames -> t=1; 3 frames padded to 4 -> t=2
    assert (None, [[2, 4, 4]]) in grids
    assert (None, [[3, 4, 4], [1, 4, 8]]) in grids  # 84x56 frames -> 112x56 (sides rounded to 56)
    assert ([[1, 4, 4]], None) in grids


def test_more_frame_list_shapes_that_work(lmms_model, monkeypatch) -> None:
    captured = Captured(lmms_model, monkeypatch)
    docs = [
        user(video(frames(1)), text("one frame")),  # padded to 2 frames
        user(video(frames(2, 1, 1)), text("1x1 px frames")),  # upscaled to min_pixels
        user(video(frames(2)), video(frames(7))),  # shorter video first
        user(image(Image.new("RGB", (64, 64))), text("and"), video(frames(4))),  # image + video
        user(video([f.convert(mode) for f, mode in zip(frames(4), ["RGBA", "L", "P", "1"])])),  # any PIL mode
        user(video(tuple(frames(2)))),  # a tuple of frames
        [{"role": "system", "content": [text("Be brief.")]}, *user(text("Hi"))],  # text only, own system turn
    ]
    results = run_requests(lmms_model, docs, max_new_tokens=2)
    assert all(isinstance(r.text, str) for r in results)
    video_grids = sorted(str(call["video_grid_thw"]) for call in captured.calls)
    assert "[[1, 4, 4]]" in video_grids  # 1 frame -> t=1
    assert "[[1, 4, 4], [4, 4, 4]]" in video_grids  # 2 frames, then 7 padded to 8


def test_batch_of_two_with_frame_lists(lmms_model) -> None:
    docs = [
        user(video(frames(5)), text("a")),
        user(text("Video 1:"), video(frames(2, 84, 56)), text("Video 2:"), video(frames(3))),
    ]
    results = run_requests(lmms_model, docs, max_new_tokens=2, batch_size=2)
    assert len(results) == 2 and all(isinstance(r.text, str) for r in results)


@pytest.mark.parametrize(
    ("content", "error", "match"),
    [
        pytest.param(
            video([Image.new("RGB", (56, 56)), Image.new("RGB", (112, 56))]),
            RuntimeError,
            "equal size",
            id="frames-of-different-sizes",
        ),
        pytest.param(
            video([__import__("numpy").zeros((56, 56, 3), "uint8")] * 2),
            AttributeError,
            "startswith",
            id="numpy-frames",
        ),
        pytest.param(video([]), ValueError, "max_workers", id="empty-frame-list"),
        pytest.param(image(Image.new("RGB", (500, 2))), ValueError, "aspect ratio", id="aspect-ratio-over-200"),
    ],
)
def test_documented_frame_constraints(lmms_model, content, error, match) -> None:
    """These inputs fail inside qwen_vl_utils (documented in the tiny_qwen module docstring)."""
    with pytest.raises(error, match=match):
        run_requests(lmms_model, [user(content, text("q"))], max_new_tokens=1)
