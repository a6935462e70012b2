"""The report's samples view in a real browser (issue 39): headless Chromium (Debian's ``chromium``)
driven by Playwright, on oracle and random runs of ``errorradar_sample,virectify_sample,crossvid_pi_sample``
through the real lmms-eval CLI."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from lmms_eval_plugins.cli_run import run_lmms_eval

pytestmark = pytest.mark.cli
TASKS = "errorradar_sample,virectify_sample,crossvid_pi_sample"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'


def _chromium() -> str:
    pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip install '.[dev]')")
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("no Chromium on this machine (.ci/run installs Debian's chromium: apt-get install -y chromium)")
    return found


@pytest.fixture(scope="module")
def views(tmp_path_factory):
    chromium = _chromium()
    from lmms_eval_plugins.report import main as report_main

    tmp = tmp_path_factory.mktemp("samples-view")
    env = {
        "LMMS_EVAL_PLUGINS_JUDGE": "offline",
        "LMMS_EVAL_PLUGINS_CACHE": str(tmp / "cache"),
        "LMMS_EVAL_PLUGINS_JUDGE_CACHE": str(tmp / "judge.sqlite3"),
        "HF_DATASETS_CACHE": str(tmp / "hf"),
    }
    for model in ("oracle", "random"):
        run = run_lmms_eval(tasks=TASKS, model=model, output_dir=tmp / model, env=env)
        assert run.results_path is not None, run.tail()
    # the random run with a hostile reply on its first ErrorRadar line
    shutil.copytree(tmp / "random", tmp / "hostile")
    samples = next((tmp / "hostile").rglob("*_samples_errorradar_step_sample.jsonl"))
    lines = samples.read_text(encoding="utf-8").splitlines()
    first = json.loads(lines[0])
    first["filtered_resps"] = HOSTILE
    first.pop("resps", None)
    samples.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n", encoding="utf-8")
    for name, runs in (("both", ["oracle", "random"]), ("hostile", ["hostile"])):
        assert report_main([*(str(tmp / r) for r in runs), "-o", str(tmp / f"report-{name}"), "--no-plots"]) == 0
    return tmp, chromium


def _open(chromium: str, folder: Path):
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
    # bypass_csp: Playwright's waits evaluate strings, which the page's CSP forbids; the page must be safe
    # without its CSP (a hostile reply is text because every element is built with textContent)
    page = browser.new_page(viewport={"width": 1400, "height": 1000}, bypass_csp=True)
    seen = {"errors": [], "requests": []}
    page.on("pageerror", lambda exc: seen["errors"].append(str(exc)))
    page.on("console", lambda msg: seen["errors"].append(msg.text) if msg.type == "error" else None)
    page.on("request", lambda request: seen["requests"].append(request.url))
    page.goto((folder / "samples.html").as_uri())
    page.wait_for_selector(".sample")
    return playwright, browser, page, seen


def _data(folder: Path) -> dict:
    text = (folder / "samples_data.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("{") : text.rindex("}") + 1])


def test_search_side_by_side_frames_verdicts_and_nothing_outside_the_folder(views):
    tmp, chromium = views
    folder = tmp / "report-both"
    assert 'href="samples.html"' in (folder / "report.html").read_text(encoding="utf-8")
    data = _data(folder)
    assert data["runs"] == ["oracle", "random"] or set(data["runs"]) == {"oracle", "random"}
    # a phrase of one document's prompt that no other document holds
    docs = data["docs"]
    words = [set(re.findall(r"[A-Za-z]{7,}", d["prompt"])) for d in docs]
    target, phrase = next(
        (k, w) for k, ws in enumerate(words) for w in sorted(ws) if sum(w in other for other in words) == 1
    )
    playwright, browser, page, seen = _open(chromium, folder)
    try:
        assert page.locator(".sample").count() == 25  # paged: the first 25 of every sample
        page.fill("#search", phrase)
        page.wait_for_function("document.querySelectorAll('.sample').length === 1")
        card = page.locator(".sample").first
        text = card.inner_text()
        assert f"doc {docs[target]['id']}" in text and "oracle" in text and "random" in text
        random_run = data["runs"].index("random")
        reply = docs[target]["runs"][random_run]["reply"]
        assert reply.strip()[:40] in text and docs[target]["gold"].strip()[:40] in text
        page.screenshot(path=str(tmp / "search.png"), full_page=True)
        # a CrossVid sample: its video's frames are thumbnails inside the folder, loaded
        page.fill("#search", "")
        page.select_option("#task", str(data["tasks"].index("crossvid_pi_sample")))
        page.wait_for_function("document.querySelectorAll('.sample img').length >= 4")
        loaded = page.evaluate(
            "Array.from(document.querySelector('.sample').querySelectorAll('img'))"
            ".filter(i => i.complete && i.naturalWidth > 0).map(i => i.src)"
        )
        assert len(loaded) >= 4 and all(src.startswith(folder.as_uri() + "/samples_media/") for src in loaded)
        page.screenshot(path=str(tmp / "crossvid.png"), full_page=False)
        # a ViRectify sample: its judge's verdict
        page.select_option("#task", str(data["tasks"].index("virectify_sample")))
        page.wait_for_selector(".sample .judge")
        assert re.search(
            r"judge semantic_match\S*.*: (verdict [01]|nothing to judge)", page.locator(".judge").first.inner_text()
        )
        # the runs disagree: only documents whose outcomes differ between the two runs
        page.select_option("#task", "")
        page.check("#disagree")
        count = int(page.inner_text("#count").split()[0])
        expected = sum(1 for d in docs if len({r["outcome"] for r in d["runs"] if r}) > 1)
        assert count == expected > 0
    finally:
        browser.close()
        playwright.stop()
    assert seen["errors"] == []
    assert seen["requests"] and all(url.startswith(folder.as_uri() + "/") for url in seen["requests"]), seen["requests"]


def test_a_hostile_reply_is_shown_as_text_and_runs_nothing(views):
    tmp, chromium = views
    folder = tmp / "report-hostile"
    playwright, browser, page, seen = _open(chromium, folder)
    try:
        page.fill("#search", "window.__pwned")
        page.wait_for_function("document.querySelectorAll('.sample').length === 1")
        assert HOSTILE in page.locator(".sample .reply").first.inner_text()
        assert page.evaluate("window.__pwned === undefined")
        assert page.locator(".sample .reply img, .sample .reply script").count() == 0
    finally:
        browser.close()
        playwright.stop()
    assert seen["errors"] == [] and all(url.startswith(folder.as_uri() + "/") for url in seen["requests"])
