"""The ``lmms-eval-plugins report`` command: read the runs, build the report, write its files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from lmms_eval_plugins.console import emit
from lmms_eval_plugins.report.document import Figure, Report
from lmms_eval_plugins.report.html_page import render_html
from lmms_eval_plugins.report.markdown_page import render_markdown
from lmms_eval_plugins.report.sections import build_report
from lmms_eval_plugins.runs import Run, RunInputError, dedupe_labels, discover_runs
from lmms_eval_plugins.safe_files import write_atomic
from lmms_eval_plugins.safe_text import redact


def write_report(report: Report, out_dir: Path, *, markdown: bool = True) -> dict[str, Path]:
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {"html": out_dir / "report.html"}
    write_atomic(written["html"], render_html(report))
    if markdown:
        figures = out_dir / "figures"
        if figures.is_dir():
            for old in figures.glob("*.png"):
                old.unlink()
        for sec in report.sections:
            for block in sec.blocks:
                if isinstance(block, Figure):
                    figures.mkdir(exist_ok=True)
                    write_atomic(figures / f"{block.id}.png", block.png)
        written["markdown"] = out_dir / "report.md"
        write_atomic(written["markdown"], render_markdown(report))
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="lmms-eval-plugins report",
        description="Paper-style HTML and Markdown report from lmms-eval output folders, several models side by side.",
        epilog="Example: lmms-eval-plugins report out/qwen7b out/qwen72b -o report/ --label Qwen2.5-VL-7B --label Qwen2.5-VL-72B",
    )
    parser.add_argument(
        "run_dirs",
        nargs="+",
        type=Path,
        metavar="RUN_DIR",
        help="an lmms-eval --output_path (or a folder below it, or one *_results.json)",
    )
    parser.add_argument(
        "-o", "--output", required=True, type=Path, metavar="OUT", help="folder for report.html, report.md and figures/"
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME",
        help="name of a run in the tables; give it once per RUN_DIR, in order (default: from the results JSON)",
    )
    parser.add_argument("--title", help="report title")
    parser.add_argument("--no-paper", action="store_true", help="leave out the rows copied from the papers")
    parser.add_argument("--no-plots", action="store_true", help="tables only (no matplotlib needed)")
    parser.add_argument("--no-markdown", action="store_true", help="write report.html only")
    parser.add_argument(
        "--no-samples", action="store_true", help="no samples view (samples.html: every logged sample, side by side)"
    )
    parser.add_argument(
        "--no-media", action="store_true", help="samples view without thumbnails (no image or video is read)"
    )
    parser.add_argument(
        "--skip-bad",
        action="store_true",
        help="turn an unreadable results JSON into a note in the report instead of an error",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if len(args.label) > len(args.run_dirs):
        parser.error(f"{len(args.label)} --label for {len(args.run_dirs)} RUN_DIR")
    runs: list[Run] = []
    notes: list[str] = []
    try:
        for k, run_dir in enumerate(args.run_dirs):
            label = args.label[k] if k < len(args.label) else None
            try:
                found = discover_runs(run_dir, label=label, skip_bad=args.skip_bad)
            except RunInputError as exc:
                if not args.skip_bad or not run_dir.exists():
                    raise
                notes.append(f"skipped: {exc}")
                continue
            runs.extend(found)
    except RunInputError as exc:
        emit(f"lmms-eval-plugins report: error: {redact(exc)}", file=sys.stderr)
        return 2
    runs = [r for r in runs if r.tasks or r.notes]
    if not any(r.tasks for r in runs):
        emit(
            "lmms-eval-plugins report: error: no task results in " + ", ".join(map(str, args.run_dirs)), file=sys.stderr
        )
        return 2
    for run in runs:  # a label read from the model args (pretrained=URL) is shown everywhere: no credential in it
        run.label = redact(run.label)
    dedupe_labels(runs)
    report = build_report(runs, title=args.title, plots=not args.no_plots, paper=not args.no_paper, extra_notes=notes)
    if not args.no_samples:
        from lmms_eval_plugins.report.samples_view import write_samples_view

        report.samples_page = write_samples_view(runs, args.output, media=not args.no_media).name
    written = write_report(report, args.output, markdown=not args.no_markdown)
    if report.samples_page:
        written["samples"] = args.output / report.samples_page
    for path in written.values():
        emit(f"wrote {path}")
    if report.notes:
        emit(f"{len(report.notes)} note(s) in the report, e.g. {redact(report.notes[0])}", file=sys.stderr)
    return 0
