"""Issue 27, media and reports: hostile files, downloads and names through the real CLIs.

- an unreadable image (half a file, a PNG with 70 zTXt chunks) with skipping on: the run writes its
  results and counts the samples as "unreadable media" (lmms-eval, the tiny Qwen2.5-VL);
- video frames above the pixel cap are refused before decoding (lmms-eval, oracle);
- hub images: a trickle stops at the deadline, an endless body at the size cap, a changed URL is
  fetched again (lmms-eval, oracle, the loopback hub);
- ``lmms-eval-plugins report`` on a stored run with an API key and markup in its model args: neither
  reaches report.md or report.html.
Plus unit tests of the shared redaction and Markdown helpers (lmms_eval_plugins/safe_text.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lmms_eval_plugins.compat.private import split_outside_brackets, split_model_args
from lmms_eval_plugins.safe_text import md_code, md_text, redact_model_args, redact_url
from lmms_eval_plugins.cli_run import run_lmms_eval
from testkit.task_utils import load_task_utils

sys.path.insert(0, str(Path(__file__).resolve().parent))
from hub_server import Fault  # noqa: E402
from test_hub import add_errorradar, hub, hub_environment  # noqa: E402,F401  (hub: the loopback-hub fixture)
from test_media import avi_of, ztxt_bomb  # noqa: E402

er = load_task_utils("errorradar")
cs = load_task_utils("causalstep")
REPORT_RUN = Path(__file__).resolve().parent / "data" / "report_runs" / "oracle"
SKIP = {"LMMS_EVAL_PLUGINS_SKIP_MISSING_MEDIA": "1"}


# ------------------------------------------------------------------------------------------- unit tests


@pytest.mark.parametrize(
    "args, expected",
    [
        ("pretrained=m,apikey=sk-1,api_key=sk-2", "pretrained=m,apikey=***,api_key=***"),
        (
            "hf_token=t,client_secret=s,password=p,auth_header=a,x=1",
            "hf_token=***,client_secret=***,password=***,auth_header=***,x=1",
        ),
        ('headers="{a:1,b:2}",access_key=k', 'headers="{a:1,b:2}",access_key=***'),
        ("base_url=http://u:pw@h:1/v1?api_key=k&q=2", "base_url=http://***@h:1/v1?api_key=***&q=2"),
    ],
)
def test_redact_model_args_by_hand(args, expected):
    assert redact_model_args(args) == expected


def test_redact_model_args_of_a_dict_and_of_nothing():
    assert redact_model_args({"model": "m", "APIKey": "sk"}) == "model=m,APIKey=***"
    assert redact_model_args(None) == ""
    for split in (split_outside_brackets, split_model_args):  # the fallback splits as lmms-eval does
        assert split('a=1,b="x,y",c={d:1,e:[2,3]}') == ["a=1", 'b="x,y"', "c={d:1,e:[2,3]}"]
    assert redact_url("not a url") == "not a url"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<img src=x onerror=alert(1)>", "&lt;img src=x onerror=alert(1)&gt;"),
        ("a|b\nc", "a\\|b c"),
        ("[click](javascript:alert(1))", "[click]\\(javascript:alert(1))"),
        ("`code` & \\", "\\`code\\` &amp; \\\\"),
        ("by_category[Cartoons][csr]", "by_category[Cartoons][csr]"),
    ],
)
def test_md_text_by_hand(text, expected):
    assert md_text(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("plain", "`plain`"),
        ("a ` b", "``a ` b``"),
        ("``` x", "```` ``` x ````"),
        ("<script>|", "`<script>\\|`"),
        ("", "` `"),
    ],
)
def test_md_code_fence_is_longer_than_any_backtick_run(text, expected):
    assert md_code(text) == expected


# ------------------------------------------------------------------------------------ the real CLIs


def _er_copy(tmp_path: Path) -> tuple[Path, list[str]]:
    """A copy of ErrorRadar's sample with its first image cut in half and its second a zTXt bomb."""
    folder = tmp_path / "data" / "errorradar"
    shutil.copytree(er.SAMPLE_DIR, folder)
    ids = [d["question_id"] for d in er.process_docs_step([{"benchmark": "errorradar", "source": "sample"}])][:2]
    first = folder / "images" / f"{ids[0]}.png"
    first.write_bytes(first.read_bytes()[: first.stat().st_size // 2])
    ztxt_bomb(folder / "images" / f"{ids[1]}.png")
    return tmp_path / "data", ids


@pytest.mark.cli
def test_unreadable_images_are_skipped_and_counted_and_the_run_writes_its_results(
    tmp_path, isolated_env, tiny_qwen_args
):
    data_root, ids = _er_copy(tmp_path)
    run = run_lmms_eval(
        tasks="errorradar_step",
        model="qwen2_5_vl",
        model_args=tiny_qwen_args,
        output_dir=tmp_path / "out",
        extra_args=["--limit", "4"],
        env={"LMMS_EVAL_PLUGINS_DATA_ROOT": str(data_root), **SKIP},
    )
    results = run.task_results("errorradar_step")
    assert results["skipped_by_reason"] == {"unreadable media": 2} and results["skipped"] == 2, run.tail()
    assert isinstance(results["step_acc"], float) and results["unscored"] == 0
    items = [s["step_acc"] for s in run.samples("errorradar_step")]
    assert {i["question_id"] for i in items if i.get("skipped_media") == "unreadable media"} == set(ids)
    assert len(items) == 4


@pytest.mark.cli
def test_video_frames_above_the_pixel_cap_are_skipped_before_decoding(tmp_path, isolated_env):
    folder = tmp_path / "data" / "causalstep"
    shutil.copytree(cs.SAMPLE_DIR, folder)
    # cs001 (96 x 72, 16 frames at 4 fps) again at 320 x 240, as an MJPEG AVI under its .mp4 name
    avi_of(folder / "videos" / "cs001.mp4", 320, 240, frames=16)
    run = run_lmms_eval(
        tasks="causalstep",
        model="oracle",
        output_dir=tmp_path / "out",
        env={
            "LMMS_EVAL_PLUGINS_DATA_ROOT": str(tmp_path / "data"),
            "LMMS_EVAL_PLUGINS_MAX_VIDEO_PIXELS": "10000",
            **SKIP,
        },
    )
    results = run.task_results("causalstep")
    assert results["skipped_by_reason"] == {"unreadable media": 1}, run.tail()


@pytest.mark.cli
def test_hub_images_have_a_deadline_a_size_cap_and_a_cache_keyed_by_url(hub, tmp_path):  # noqa: F811
    paths = add_errorradar(hub)
    ids = [d["question_id"] for d in er.process_docs_step([{"benchmark": "errorradar", "source": "sample"}])]
    hub.fault_url(paths[ids[0]], Fault(trickle=0.05, times=None))  # 0.5 s read timeout: never trips
    hub.fault_url(paths[ids[1]], Fault(endless=True, times=None))
    env = {
        **hub_environment(tmp_path, hub.endpoint),
        "HF_HUB_OFFLINE": "0",
        **SKIP,
        "LMMS_EVAL_PLUGINS_DOWNLOAD_DEADLINE": "2",
        "LMMS_EVAL_PLUGINS_DOWNLOAD_MAX_BYTES": "200000",
    }
    started = time.monotonic()
    first = run_lmms_eval(
        tasks="errorradar_step",
        model="oracle",
        output_dir=tmp_path / "first",
        env=env,
        extra_args=["--limit", "4"],
        timeout=300,
        log_samples=False,
    )
    assert first.task_results("errorradar_step")["skipped_by_reason"] == {"missing media": 2}, first.tail()
    assert time.monotonic() - started < 120
    images = Path(env["LMMS_EVAL_PLUGINS_CACHE"]) / "errorradar" / "images"
    assert max(p.stat().st_size for p in images.iterdir()) < 200_000  # nothing endless was kept

    # the CSV now points ids[2] at a new address that is gone: the cached image of the old address is not used
    from test_hub import _point_at

    _point_at(hub, ids[2], "/images/moved.png", b"")
    hub.fault_url("/images/moved.png", Fault(status=404, times=None))
    second = run_lmms_eval(
        tasks="errorradar_step",
        model="oracle",
        output_dir=tmp_path / "second",
        env=env,
        extra_args=["--limit", "4"],
        timeout=300,
        log_samples=False,
    )
    assert second.task_results("errorradar_step")["skipped_by_reason"] == {"missing media": 3}, second.tail()


@pytest.mark.cli
def test_the_report_shows_no_key_and_no_markup_from_a_stored_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(REPORT_RUN, run)
    [results_path] = run.glob("*_results.json")
    data = json.loads(results_path.read_text(encoding="utf-8"))
    data["config"]["model"] = "<script>alert(1)</script>"
    data["config"]["model_args"] = (
        "pretrained=<img src=x onerror=alert(2)>,apikey=sk-LEAK-ONE,"
        "base_url=http://user:LEAK-TWO@127.0.0.1:9/v1?token=LEAK-THREE"
    )
    results_path.write_text(json.dumps(data), encoding="utf-8")
    cli = Path(sys.executable).parent / "lmms-eval-plugins"
    done = subprocess.run(
        [str(cli), "report", str(run), "-o", str(tmp_path / "out"), "--no-plots"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for name in ("report.md", "report.html"):
        text = (tmp_path / "out" / name).read_text(encoding="utf-8")
        assert not re.search("LEAK-(ONE|TWO|THREE)", text), name
        assert "<script>alert" not in text and "<img src=x" not in text, name
        assert "apikey=***" in text, name
