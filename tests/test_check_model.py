"""``lmms-eval-plugins check-model``: per-task completion, format compliance, typical failure, request shapes."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from lmms_eval_plugins import check_model as cm
from lmms_eval_plugins import check_model_observed as cmo
from lmms_eval_plugins import check_model_tasks as cmt
from lmms_eval_plugins.tasks_command import task_names

# One image benchmark, and one video benchmark with a free-form judged task when it exists.
IMAGE_GROUP = "errorradar_sample"
VIDEO_TASKS = [t for t in ("crossvid_bu_sample", "crossvid_ccqa_sample") if t in task_names()]


# ------------------------------------------------------------------------------------------------ unit


def test_task_selection_by_task_group_and_benchmark():
    index = cm.task_index()
    everything = cm.select_tasks(None, index)
    assert everything == sorted(t for t, kind in task_names().items() if kind == "task" and t.endswith("_sample"))
    assert cm.select_tasks("errorradar", index) == [
        "errorradar_cate_sample",
        "errorradar_step_sample",
    ]  # not the full group
    assert cm.select_tasks("mmerror_sample,errorradar_step_sample", index) == [
        "mmerror_etc_sample",
        "mmerror_epd_sample",
        "errorradar_step_sample",
    ]
    with pytest.raises(SystemExit, match="not a task"):
        cm.select_tasks("nope", index)


def frames(n, size=(8, 6)):
    return [Image.new("RGB", size) for _ in range(n)]


def test_request_shapes_count_visuals_and_flag_pitfalls():
    shapes = cmt.Shapes()
    cmt.measure_messages(
        [
            {"role": "system", "content": [{"type": "text", "text": "You are a helpful video analyzer."}]},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Video 1:"},
                    {"type": "video", "url": frames(4)},
                    {"type": "text", "text": "Video 2:"},
                    {"type": "video", "url": frames(2) + frames(1, (4, 4))},
                    {"type": "video", "url": []},
                    {"type": "text", "text": "Question"},
                ],
            },
        ],
        shapes,
        where="doc 0",
    )
    cmt.measure_messages(
        [
            {
                "role": "user",
                "content": [{"type": "image", "url": Image.new("RGB", (20, 10))}, {"type": "text", "text": "Q"}],
            }
        ],
        shapes,
        where="doc 1",
    )
    s = shapes.summary()
    assert (s["requests"], s["images"], s["videos"], s["frames_per_video"], s["frames_per_request"]) == (
        2,
        "0-1",
        "0-3",
        "0-4",
        "0-7",
    )
    assert s["interleaved_requests"] == 1 and s["max_size"] == "20x10"
    issues = " ".join(s["issues"])
    assert "video 2 mixes frame sizes" in issues and "video 3 is an empty frame list" in issues
    assert "fewer frames (3) than video 1 (4)" in issues


def test_metrics_are_read_like_every_other_command_reads_them():
    # stderr companions (all three kinds) are no metrics; the "none" filter wins over another filter,
    # whichever comes first; "N/A" stays a metric value but not a headline number
    raw = {
        "alias": "t",
        "acc,strict": 10.0,
        "acc,none": 40.0,
        "acc_stderr,none": 5.0,
        "acc_stderr_clt,none": 0.05,
        "acc_stderr_clustered,none": 0.06,
        "parse_fail,none": 3,
        "f1,none": "N/A",
        "f1_stderr,none": "N/A",
    }
    metrics = cm._metrics({"results": {"t": raw}}, "t")
    assert metrics == {"acc": 40.0, "parse_fail": 3, "f1": "N/A"}
    assert cm._headline(metrics) == {"acc": 40.0, "parse_fail": 3}
    assert cm._metrics({"results": {}}, "t") == {} and cm._metrics({}, "t") == {}


def test_compliance_from_logged_items():
    samples = [
        {"filtered_resps": ["Error Step: Step 2"], "step_acc": {"pred": 2, "parse_error": None}},
        {"filtered_resps": ["I think it is fine"], "step_acc": {"pred": None, "parse_error": "no step found"}},
        {"filtered_resps": ["nothing"], "step_acc": {"pred": None, "parse_error": "no step found"}},
        {"filtered_resps": ["Step 9"], "step_acc": {"pred": None, "parse_error": "step 9 out of range 1..4"}},
    ]
    stats = cm.compliance_from_samples(samples, ["step_acc"])
    assert stats["compliance"] == 25.0 and (stats["requests"], stats["parsed"]) == (4, 1)
    assert stats["typical_failure"] == {
        "parse_error": "no step found",
        "count": 2,
        "example_output": "I think it is fine",
    }
    # ViRectify's format flags, and a judged reply logged as the filter's JSON
    judged = json.dumps({"text": "no boxed answer here", "judge": {"skipped": True, "error": None}})
    stats = cm.compliance_from_samples(
        [
            {"filtered_resps": ["<error_identify>..."], "acc_i": {"format_ok": True, "missing": {}}},
            {
                "filtered_resps": [judged],
                "acc_i": {"format_ok": False, "missing": {"timestamps": "no <timestamps> tag"}},
            },
        ],
        ["acc_i"],
    )
    assert stats["compliance"] == 50.0
    assert stats["typical_failure"]["parse_error"] == "timestamps: no <timestamps> tag"
    assert stats["typical_failure"]["example_output"] == "no boxed answer here"
    assert cm.compliance_from_samples([{"filtered_resps": ["x"], "score": 1.0}], ["score"]) is None
    assert cm.compliance_from_metrics({"parse_fail": 3, "acc": 50.0}, 12)["compliance"] == 75.0


def test_last_exception_line():
    log = "INFO ok\nTraceback (most recent call last):\n  File x\nlmms_eval_plugins.errors.MediaError: video not found | record: 7\n"
    assert cm.last_exception(log) == "MediaError: video not found | record: 7"
    assert cm.last_exception("all good\n") is None


# ------------------------------------------------------------------------------------------------ real runs


def run_check(tmp_path, *args) -> tuple[int, str, dict]:
    out = tmp_path / "report.json"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = cm.main([*args, "--json", str(out), "--output_path", str(tmp_path / "runs")])
    return code, buffer.getvalue(), json.loads(out.read_text())


@pytest.mark.cli
def test_oracle_completes_every_task_with_full_compliance(tmp_path, isolated_env):
    tasks = ",".join([IMAGE_GROUP, *VIDEO_TASKS])
    code, table, report = run_check(tmp_path, "--model", "oracle", "--tasks", tasks)
    assert code == 0 and report["all_completed"]
    rows = {r["task"]: r for r in report["tasks"]}
    assert set(rows) == {"errorradar_step_sample", "errorradar_cate_sample", *VIDEO_TASKS}
    for task, row in rows.items():
        assert row["completed"] and row["compliance"] == 100.0 and row["typical_failure"] is None, task
        assert row["requests"] > 0 and row["parsed"] == row["requests"]
    assert rows["errorradar_step_sample"]["shapes"]["images"] == "1"
    assert rows["errorradar_step_sample"]["shapes"]["interleaved_requests"] == 0  # one visual: nothing to interleave
    for task in VIDEO_TASKS:
        shapes = rows[task]["shapes"]
        assert shapes["error"] is None and shapes["images"] == "0" and int(shapes["videos"].split("-")[0]) >= 2
        assert shapes["interleaved_requests"] == shapes["requests"]  # "Video 1:" frames "Video 2:" frames
    assert "| errorradar_step_sample | yes | 100.0% (10/10) |" in table


@pytest.mark.cli
def test_tiny_qwen_completes_and_its_unreadable_replies_are_reported(tmp_path, isolated_env, tiny_qwen_args):
    tasks = ",".join(["errorradar_step_sample", *VIDEO_TASKS[:1]])
    code, table, report = run_check(
        tmp_path,
        "--model",
        "qwen2_5_vl",
        "--model_args",
        tiny_qwen_args,
        "--tasks",
        tasks,
        "--limit",
        "3",
        "--gen_kwargs",
        "max_new_tokens=8",
    )
    assert code == 0
    for row in report["tasks"]:
        assert row["completed"], row
        assert 1 <= row["requests"] <= 3 and 0.0 <= row["compliance"] <= 100.0  # --limit 3 (the CrossVid sample has 2)
        if row["compliance"] < 100.0:  # random weights: noise, so the parser fails and says why
            failure = row["typical_failure"]
            assert failure["parse_error"] and failure["count"] >= 1 and isinstance(failure["example_output"], str)
            assert sum(row["failures"].values()) == row["requests"] - row["parsed"]
        assert row["shapes"]["requests"] == row["requests"]  # shapes computed on the same (limited) docs
    assert "| errorradar_step_sample | yes |" in table


@pytest.mark.cli
def test_a_failing_task_is_isolated_and_named(tmp_path, isolated_env, monkeypatch):
    # the full-data task reads an empty local data root and fails while building its docs; the sample
    # task (bundled data) in the same run must still be reported, and the failure must say why
    (tmp_path / "empty-root").mkdir()
    monkeypatch.setenv("LMMS_EVAL_PLUGINS_DATA_ROOT", str(tmp_path / "empty-root"))
    reports = cm.check_model(
        model="oracle",
        model_args=None,
        tasks=["errorradar_step", "errorradar_step_sample"],
        output_dir=tmp_path / "runs",
        shapes=False,
        limit=2,
    )
    by_task = {r.task: r for r in reports}
    failed, ok = by_task["errorradar_step"], by_task["errorradar_step_sample"]
    # the missing data is found before the model loads, with every other blocker of the run (issue 37)
    assert (
        not failed.completed
        and failed.error.startswith("RunBlockedError:")
        and "holds no 'errorradar' folder" in failed.error
    )
    assert ok.completed and ok.compliance == 100.0 and ok.requests == 2
    assert "**run failed**: RunBlockedError" in cm.markdown(reports, model="oracle", model_args=None)


# ------------------------------------------------------------------------------------------------ what was sent


def test_observe_plan_proxies_api_classes_only(monkeypatch):
    args = "model_version=m,base_url=http://h:1/v1/,api_key=sk-1,max_retries=1"
    plan = cm.observe_plan("openai", args, {})
    assert (plan.upstream, plan.via) == ("http://h:1/v1", "base_url")
    assert (
        cm.replace_model_arg(args, "base_url", "http://127.0.0.1:9/v1")
        == "model_version=m,base_url=http://127.0.0.1:9/v1,api_key=sk-1,max_retries=1"
    )
    assert (
        cm.observe_plan("my_api_class", "base_url=http://x/v1", {}).upstream == "http://x/v1"
    )  # any class given base_url
    # without base_url the class falls back to OPENAI_API_BASE, then the client's OPENAI_BASE_URL, then the public endpoint
    assert (
        cm.observe_plan(
            "openai", "model_version=m", {"OPENAI_API_BASE": "http://a/v1", "OPENAI_BASE_URL": "http://b/v1"}
        ).upstream
        == "http://a/v1"
    )
    assert cm.observe_plan("openai", None, {"OPENAI_BASE_URL": "http://b/v1"}).via == "OPENAI_API_BASE"
    assert cm.observe_plan("openai", None, {}).upstream == cmo.DEFAULT_OPENAI_BASE_URL
    for model, model_args in [
        ("qwen2_5_vl", "pretrained=x"),
        ("openai", "azure_openai=True"),
        ("litellm", "model=anthropic/c"),
    ]:
        plan = cm.observe_plan(model, model_args, {})
        assert plan.upstream is None and plan.reason.startswith("not observable"), model
    assert cm.display_model_args(args) == "model_version=m,base_url=http://h:1/v1/,api_key=***,max_retries=1"


def _record(n, items, texts, *, body=None, status=200):
    from lmms_eval_plugins.recording_proxy import Record, text_signature

    chat = {"model": "m", "signature": text_signature(texts), "items": items}
    return Record(
        n=n,
        label="all",
        method="POST",
        path="/v1/chat/completions",
        body_bytes=1,
        body_sha256=body or f"body-{n}",
        status=status,
        chat=chat,
    )


def test_sent_bodies_compared_with_intended_shapes():
    messages = [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Video 1:"},
                {"type": "video", "url": frames(4, (160, 120))},
                {"type": "text", "text": "Video 2:"},
                {"type": "video", "url": frames(5, (160, 120))},
                {"type": "text", "text": "Q"},
            ],
        }
    ]
    intent = cmt.doc_intent(messages, 0)
    image_intent = cmt.doc_intent(
        [
            {
                "role": "user",
                "content": [{"type": "image", "url": Image.new("RGB", (20, 10))}, {"type": "text", "text": "Q2"}],
            }
        ],
        1,
    )
    big = [336, 252]
    sent = ["text", *[big] * 4, "text", *[big] * 6, "text"]  # fetch_video: resized, the odd count padded
    records = [
        _record(0, sent, ["Video 1:", "Video 2:", "Q"]),
        _record(1, sent, ["Video 1:", "Video 2:", "Q"], body="body-0", status=502),  # a retry of the same body
        _record(2, [[20, 10], "text"], ["Q2"]),
        _record(3, ["text"], ["something else"]),
    ]
    observed = cm.observed_summary(records, [intent, image_intent], endpoint="http://x/v1")
    assert (observed["requests"], observed["distinct_requests"], observed["error_replies"]) == (4, 3, 1)
    assert observed["images_per_request"] == "0-10" and observed["frames_per_video"] == "4-6"
    assert observed["image_sizes"] == {"336x252": 10, "20x10": 1}
    assert observed["differences"] == [
        "frames resized 160x120 -> 336x252 (doc 0)",
        "video 2: 5 frames intended, 6 sent (padding) (doc 0)",
        "1 request(s) matched no doc's text (not compared)",
    ]
    # several tasks in one lmms-eval run: each body goes to the task whose doc has its text
    by_task = cm.attribute_records(records, {"a": [intent], "b": [image_intent]})
    assert (
        [r.n for r in by_task["a"]] == [0, 1]
        and [r.n for r in by_task["b"]] == [2]
        and [r.n for r in by_task[None]] == [3]
    )
    assert cmo.compare_runs(image_intent, [[40, 20], "text"]) == ["image resized 20x10 -> 40x20"]
    assert cmo.compare_runs(intent, ["text", *[big] * 4, "text", *[big] * 5, "text"]) == [
        "frames resized 160x120 -> 336x252"
    ]


def test_failed_requests_are_not_replies():
    failed = {
        "resps": [["[LMMS_EVAL_REQUEST_FAILED after 1 retries] Connection error."]],
        "filtered_resps": ["x"],
        "step_acc": {"pred": None, "parse_error": "no step found"},
    }
    judged = {"resps": [], "filtered_resps": [json.dumps({"text": "[LMMS_EVAL_BUDGET_EXCEEDED]", "judge": {}})]}
    ok = {"resps": [["Step 2"]], "filtered_resps": ["Step 2"], "step_acc": {"pred": 2, "parse_error": None}}
    assert cm.failed_reply(failed).startswith("[LMMS_EVAL_REQUEST_FAILED after 1 retries]")
    assert cm.failed_reply(judged) == "[LMMS_EVAL_BUDGET_EXCEEDED]" and cm.failed_reply(ok) is None
    stats = cm.compliance_from_samples([failed, ok], ["step_acc"])  # a failed request is not a format failure
    assert (stats["requests"], stats["parsed"], stats["compliance"]) == (1, 1, 100.0)


class _EchoUpstream:
    """A raw upstream: answers with the exact bytes and headers it received (and a 429 for /limited)."""

    def __enter__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                payload = json.dumps(
                    {
                        "body": body.decode("latin-1"),
                        "path": self.path,
                        "headers": {k.lower(): v for k, v in self.headers.items()},
                    }
                ).encode()
                self.send_response(429 if self.path.endswith("/limited") else 200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Retry-After", "7")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def test_recording_proxy_forwards_unchanged_and_records_no_key():
    import base64
    import hashlib
    import http.client
    import io
    import socket

    from judge_server import TEST_API_KEY

    from lmms_eval_plugins.recording_proxy import RecordingProxy

    png = io.BytesIO()
    Image.new("RGB", (33, 21)).save(png, "PNG")
    url = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    raw = (
        '{"model": "m",\n "messages": [{"role": "user", "content": [{"type": "text", "text": "Q"},'
        f' {{"type": "image_url", "image_url": {{"url": "{url}"}}}}]}}]}}'
    ).encode()

    def post(port, path, body, **headers):
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request(
            "POST",
            path,
            body=body,
            headers={"Authorization": f"Bearer {TEST_API_KEY}", "Content-Type": "application/json", **headers},
        )
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()

    with _EchoUpstream() as upstream, RecordingProxy(upstream, max_body=100_000) as proxy:
        assert proxy.base_url.endswith("/v1") and proxy.base_url.startswith("http://127.0.0.1:")
        status, headers, reply = post(proxy.port, "/v1/chat/completions?x=1", raw)
        echoed = json.loads(reply)
        assert (
            status == 200 and echoed["body"].encode("latin-1") == raw and echoed["path"] == "/v1/chat/completions?x=1"
        )
        assert echoed["headers"]["authorization"] == f"Bearer {TEST_API_KEY}"  # forwarded...
        status, headers, _ = post(proxy.port, "/v1/limited", b"{}")
        assert status == 429 and headers["Retry-After"] == "7"  # an error reply goes back as it came
        assert post(proxy.port, "/v1/chat/completions", b"x" * 100_001)[0] == 413
        records = list(proxy.records)
    assert records[0].body_sha256 == hashlib.sha256(raw).hexdigest() and records[0].status == 200
    assert records[0].chat["items"] == ["text", [33, 21]] and records[0].path == "/v1/chat/completions"
    assert [r.status for r in records[1:]] == [429, None]
    assert TEST_API_KEY not in repr(records)  # ...and never recorded

    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    dead_url = f"http://127.0.0.1:{dead.getsockname()[1]}/v1"
    dead.close()
    with RecordingProxy(dead_url) as proxy:
        status, _, reply = post(proxy.port, "/v1/chat/completions", raw)
    assert status == 502 and "unreachable" in json.loads(reply)["error"]["message"]
    assert proxy.records[0].status is None and proxy.records[0].error


def _runs(items):
    runs, count = [], 0
    for item in [*items, "text"]:
        if item == "text":
            runs, count = runs + [count] * bool(count), 0
        else:
            count += 1
    return runs


@pytest.mark.cli
def test_openai_class_sent_requests_are_observed_through_the_proxy(tmp_path, isolated_env, monkeypatch):
    from judge_server import TEST_API_KEY, JudgeServer

    from lmms_eval_plugins import recording_proxy
    from lmms_eval_plugins.recording_proxy import chat_items, summarise_body

    proxies = []

    class Capturing(recording_proxy.RecordingProxy):
        def start(self):
            proxies.append(self)
            return super().start()

    monkeypatch.setattr(recording_proxy, "RecordingProxy", Capturing)
    with JudgeServer(require_key=TEST_API_KEY) as server:
        code, table, report = run_check(
            tmp_path,
            "--model",
            "openai",
            "--tasks",
            "crossvid_bu_sample,errorradar_step_sample",
            "--limit",
            "2",
            "--model_args",
            f"model_version=m,base_url={server.base_url},api_key={TEST_API_KEY},max_retries=1",
        )
        bodies, headers = list(server.requests), list(server.request_headers)
    assert code == 0 and report["all_completed"], table
    rows = {r["task"]: r for r in report["tasks"]}
    # the server got every body the class sent, unchanged, with the key in Authorization
    (proxy,) = proxies
    assert proxy._httpd is None  # stopped when check-model ended
    assert sorted(json.dumps(summarise_body(json.dumps(b).encode()), sort_keys=True) for b in bodies) == sorted(
        json.dumps(r.chat, sort_keys=True) for r in proxy.records
    )
    assert all(h.get("Authorization") == f"Bearer {TEST_API_KEY}" for h in headers)
    assert len(bodies) == sum(row["observed"]["requests"] for row in rows.values()) == 4
    assert TEST_API_KEY not in table and TEST_API_KEY not in json.dumps(report)
    # what was observed is what the server received
    video_bodies = [b for b in bodies if len(chat_items(b)) > 4]
    received_runs = [n for b in video_bodies for n in _runs(chat_items(b))]
    received_sizes = {f"{w}x{h}" for b in video_bodies for w, h in (i for i in chat_items(b) if isinstance(i, list))}
    video, image = rows["crossvid_bu_sample"]["observed"], rows["errorradar_step_sample"]["observed"]
    assert video["observable"] and video["requests"] == 2 and video["error_replies"] == 0
    assert video["frames_per_video"] == cmo._span(received_runs) and set(video["image_sizes"]) == received_sizes
    intended = rows["crossvid_bu_sample"]["shapes"]
    assert intended["max_size"] not in received_sizes  # fetch_video resizes small frames up to its pixel minimum
    assert f"frames resized {intended['max_size']} -> {received_sizes.pop()} (docs 0, 1)" in video["differences"]
    assert all("matched no doc" not in d for d in video["differences"])
    if video["frames_per_video"] != intended["frames_per_video"]:  # odd frame counts padded by fetch_video
        assert any("frames intended" in d for d in video["differences"])
    assert image["images_per_request"] == "1" and image["image_sizes"] == {"96x72": 2} and image["differences"] == []
    assert "| crossvid_bu_sample | yes |" in table and "sent differs from intended: frames resized" in table


@pytest.mark.cli
def test_failed_model_requests_mean_not_completed(tmp_path, isolated_env):
    import socket

    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    port = dead.getsockname()[1]
    dead.close()
    code, table, report = run_check(
        tmp_path,
        "--model",
        "openai",
        "--tasks",
        "errorradar_step_sample",
        "--limit",
        "2",
        "--model_args",
        f"model_version=m,base_url=http://127.0.0.1:{port}/v1,api_key=k,max_retries=1",
    )
    (row,) = report["tasks"]
    assert code != 0 and not report["all_completed"] and not row["completed"]
    assert row["failed_requests"] == 2 and row["error"].startswith(
        "2 of 2 model requests failed: [LMMS_EVAL_REQUEST_FAILED"
    )
    assert "unreachable" in row["error"]  # the proxy's 502 names the dead endpoint
    assert row["observed"]["requests"] >= 2 and row["observed"]["error_replies"] == row["observed"]["requests"]
    assert "**requests failed**: 2 of 2 model requests failed" in table and "0/1 tasks completed" in table


def test_the_markdown_carries_no_raw_html_no_key_and_no_code_span_break_out():
    """Issue 27: task names, errors and replies are untrusted; a backtick run in a reply cannot end its span."""
    import re

    reply = "x `` <img src=x onerror=alert(1)> ``` y"
    reports = [
        cm.TaskReport(
            "<script>alert(1)</script>",
            "errorradar",
            True,
            requests=2,
            parsed=1,
            compliance=50.0,
            typical_failure={"parse_error": "<iframe src=//evil>", "count": 1, "example_output": reply},
        ),
        cm.TaskReport("t2", "mmerror", False, error="<img src=x onerror=alert(2)>"),
    ]
    text = cm.markdown(reports, model="<b>m</b>", model_args="pretrained=p,apikey=sk-LEAK1,auth=Bearer LEAK2")
    assert "sk-LEAK1" not in text and "LEAK2" not in text and "apikey=***" in text
    outside_spans = re.sub(r"(`+)(?!`).*?(?<!`)\1(?!`)", "", text)
    for tag in ("<script", "<img", "<iframe", "<b>"):
        assert tag not in outside_spans, tag
    assert "````x `` <img src=x onerror=alert(1)> ``` y````" in text  # a fence of 4: longer than the ``` inside
