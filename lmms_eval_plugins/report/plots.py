"""The report's plots: matplotlib figures drawn on an Agg canvas (no pyplot state), returned as PNG bytes."""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Mapping, Sequence

from lmms_eval_plugins.report.formatting import num


class Plotter:
    """matplotlib (Agg canvas, no pyplot state) figures as PNG bytes; disabled when matplotlib is absent."""

    def __init__(self, enabled: bool = True, dpi: int = 96) -> None:
        self.dpi = dpi
        self.error: str | None = None
        self.enabled = enabled
        if enabled:
            try:
                import matplotlib  # noqa: F401
                from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: F401
                from matplotlib.figure import Figure as _F  # noqa: F401
            except ImportError as exc:  # pragma: no cover - depends on the environment
                self.enabled = False
                self.error = (
                    f"plots left out: matplotlib is not installed ({exc}); "
                    "pip install matplotlib (a dependency of lmms-eval-plugins: reinstall it)"
                )
        self.colors: dict[str, str] = {}

    def color(self, label: str) -> str:
        if label not in self.colors:
            palette = [
                "#1f77b4",
                "#ff7f0e",
                "#2ca02c",
                "#d62728",
                "#9467bd",
                "#8c564b",
                "#e377c2",
                "#7f7f7f",
                "#bcbd22",
                "#17becf",
            ]
            self.colors[label] = palette[len(self.colors) % len(palette)]
        return self.colors[label]

    def figure(self, width: float, height: float):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure as MplFigure

        fig = MplFigure(figsize=(width, height), dpi=self.dpi, layout="constrained")
        FigureCanvasAgg(fig)
        return fig

    def png(self, fig) -> bytes:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=self.dpi, facecolor="white")
        return buffer.getvalue()

    # ------------------------------------------------------------------------------- chart kinds

    def grouped_bars(
        self,
        ax,
        categories: Sequence[str],
        series: Mapping[str, Sequence[float | None]],
        *,
        ylabel: str = "",
        ylim: tuple[float, float] | None = None,
        colors: Mapping[str, str] | None = None,
        value_labels: bool = False,
        hatches: Mapping[str, str] | None = None,
    ) -> None:
        n = max(1, len(series))
        width = 0.8 / n
        for i, (name, values) in enumerate(series.items()):
            xs = [k + (i - (n - 1) / 2) * width for k in range(len(categories))]
            heights = [v if v is not None else 0.0 for v in values]
            bars = ax.bar(
                xs,
                heights,
                width=width * 0.95,
                label=name,
                color=(colors or {}).get(name) or self.color(name),
                hatch=(hatches or {}).get(name),
            )
            if value_labels:
                for bar, v in zip(bars, values):
                    if v is not None:
                        ax.annotate(
                            f"{v:.1f}",
                            (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center",
                            va="bottom",
                            fontsize=7,
                            xytext=(0, 1),
                            textcoords="offset points",
                        )
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(
            categories,
            rotation=30 if max((len(c) for c in categories), default=0) > 6 else 0,
            ha="right" if max((len(c) for c in categories), default=0) > 6 else "center",
            fontsize=8,
        )
        if ylabel:
            ax.set_ylabel(ylabel)
        if ylim:
            ax.set_ylim(*ylim)
        ax.grid(axis="y", alpha=0.3)
        ax.set_axisbelow(True)

    @staticmethod
    def legend(fig, ax, ncol: int | None = None) -> None:
        handles, labels = ax.get_legend_handles_labels()
        if len(labels) > 1:
            fig.legend(
                handles, labels, loc="outside lower center", ncol=ncol or min(6, len(labels)), fontsize=8, frameon=False
            )

    def bars_figure(
        self,
        title: str,
        categories: Sequence[str],
        series: Mapping[str, Sequence[float | None]],
        *,
        ylabel: str = "%",
        ylim: tuple[float, float] | None = (0, 105),
        width: float | None = None,
        value_labels: bool = True,
    ) -> bytes:
        fig = self.figure(width or max(5.0, 1.2 + 0.55 * len(categories) * max(1, len(series)) ** 0.5), 3.4)
        ax = fig.add_subplot()
        if value_labels and ylim:
            ylim = (ylim[0], ylim[1] * 1.07)
        self.grouped_bars(ax, categories, series, ylabel=ylabel, ylim=ylim, value_labels=value_labels)
        ax.set_title(title, fontsize=10)
        self.legend(fig, ax)
        return self.png(fig)

    def panels_figure(
        self,
        title: str,
        panels: Sequence[tuple[str, Sequence[str], Mapping[str, Sequence[float | None]]]],
        *,
        ylabel: str = "%",
        ylim: tuple[float, float] | None = (0, 105),
    ) -> bytes:
        n = len(panels)
        widest = max(len(p[1]) for p in panels)
        fig = self.figure(min(16.0, max(5.0, n * (1.6 + 0.45 * widest))), 3.6)
        axes = fig.subplots(1, n, squeeze=False)[0]
        for ax, (sub, cats, series) in zip(axes, panels):
            self.grouped_bars(ax, cats, series, ylabel=ylabel, ylim=ylim)
            ax.set_title(sub, fontsize=9)
        fig.suptitle(title, fontsize=10)
        self.legend(fig, max(axes, key=lambda a: len(a.get_legend_handles_labels()[1])))
        return self.png(fig)

    def confusion_grid(
        self, title: str, matrices: Mapping[str, Mapping[str, Mapping[str, int]]], short: Callable[[str], str] = str
    ) -> bytes:
        n = len(matrices)
        cols = min(n, 3)
        rows = math.ceil(n / cols)
        first = next(iter(matrices.values()))
        size = max(len(first), 3)
        fig = self.figure(cols * (1.6 + 0.55 * size), rows * (1.4 + 0.5 * size) + 0.4)
        axes = fig.subplots(rows, cols, squeeze=False)
        for ax in axes.flat[n:]:
            ax.set_visible(False)
        for ax, (name, matrix) in zip(axes.flat, matrices.items()):
            gold = list(matrix)
            pred = list(dict.fromkeys(k for row in matrix.values() for k in row))
            values = [[float(matrix[g].get(p, 0) or 0) for p in pred] for g in gold]
            shares = [[v / (sum(row) or 1) for v in row] for row in values]
            ax.imshow(shares, cmap="Blues", vmin=0, vmax=1, aspect="auto")
            for i, row in enumerate(values):
                for j, v in enumerate(row):
                    ax.text(
                        j,
                        i,
                        f"{int(v)}",
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="white" if shares[i][j] > 0.6 else "black",
                    )
            ax.set_xticks(range(len(pred)))
            ax.set_xticklabels([short(p) for p in pred], rotation=45, ha="right", fontsize=7)
            ax.set_yticks(range(len(gold)))
            ax.set_yticklabels([short(g) for g in gold], fontsize=7)
            ax.set_xlabel("predicted", fontsize=8)
            ax.set_ylabel("gold", fontsize=8)
            ax.set_title(name, fontsize=9)
        fig.suptitle(title, fontsize=10)
        return self.png(fig)

    def radar(
        self,
        title: str,
        axes_labels: Sequence[str],
        series: Mapping[str, Sequence[float | None]],
        references: Mapping[str, Sequence[float | None]] | None = None,
    ) -> bytes:
        fig = self.figure(5.2, 4.8)
        ax = fig.add_subplot(projection="polar")
        angles = [2 * math.pi * k / len(axes_labels) for k in range(len(axes_labels))]
        closed = angles + angles[:1]
        for (name, values), style in zip((references or {}).items(), ("--", ":", "-.", (0, (5, 1)))):
            vals = [v or 0.0 for v in values]
            ax.plot(closed, vals + vals[:1], linestyle=style, linewidth=1.1, color="#888888", label=name)
        for name, values in series.items():
            vals = [v or 0.0 for v in values]
            ax.plot(closed, vals + vals[:1], linewidth=1.6, color=self.color(name), label=name)
            ax.fill(closed, vals + vals[:1], alpha=0.12, color=self.color(name))
        ax.set_xticks(angles)
        ax.set_xticklabels(axes_labels, fontsize=8)
        ax.set_ylim(0, 100)
        ax.set_yticks([25, 50, 75, 100])
        ax.tick_params(axis="y", labelsize=6)
        ax.set_title(title, fontsize=10)
        self.legend(fig, ax, ncol=3)
        return self.png(fig)

    def histograms(
        self, title: str, data: Mapping[str, Sequence[int]], xlabel: str | Sequence[str], *, panels: Sequence[str] = ()
    ) -> bytes:
        """Side-by-side bars of integer distributions (share of items, %); ``data`` keys are
        ``"panel|series"`` when ``panels`` are given (then ``xlabel`` may be one label per panel)."""
        groups = list(panels) or [""]
        fig = self.figure(max(5.0, 4.6 * len(groups)), 3.3)
        axes = fig.subplots(1, len(groups), squeeze=False)[0]
        xlabels = [xlabel] * len(groups) if isinstance(xlabel, str) else list(xlabel)
        for ax, panel, label in zip(axes, groups, xlabels):
            series = {k.split("|", 1)[-1]: v for k, v in data.items() if not panels or k.split("|", 1)[0] == panel}
            lo = min((min(v) for v in series.values() if v), default=0)
            hi = max((max(v) for v in series.values() if v), default=1)
            cats = list(range(lo, hi + 1))
            shares = {
                name: [100.0 * sum(1 for x in values if x == c) / len(values) if values else None for c in cats]
                for name, values in series.items()
            }
            self.grouped_bars(ax, [str(c) for c in cats], shares, ylabel="% of items", ylim=(0, 105))
            ax.set_xlabel(label, fontsize=8)
            if panel:
                ax.set_title(panel, fontsize=9)
        fig.suptitle(title, fontsize=10)
        self.legend(fig, axes[0])
        return self.png(fig)

    def cal_bias(
        self,
        title: str,
        distributions: Mapping[str, Mapping[str, float]],
        classes: Sequence[str],
        gold: Mapping[str, float] | None,
    ) -> bytes:
        fig = self.figure(10.0, 3.9)
        left, right = fig.subplots(1, 2, width_ratios=[1.6, 1])
        cats = list(classes) + (["unparseable"] if any(d.get("unparseable") for d in distributions.values()) else [])
        series: dict[str, list[float | None]] = {}
        colors = {}
        if gold:
            series["gold (data)"] = [gold.get(c, 0.0) for c in cats]
            colors["gold (data)"] = "#cccccc"
        for name, dist in distributions.items():
            series[name] = [num(dist.get(c)) or 0.0 for c in cats]
        self.grouped_bars(left, cats, series, ylabel="% of predictions", ylim=(0, 105), colors=colors)
        left.set_title("prediction distribution", fontsize=9)
        left.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.1), ncol=min(6, len(series)))
        names = list(distributions)
        cal = [num(distributions[n].get("CAL")) or 0.0 for n in names]
        unp = [num(distributions[n].get("unparseable")) or 0.0 for n in names]
        other = [max(0.0, 100.0 - c - u) for c, u in zip(cal, unp)]
        ys = range(len(names))
        right.barh(ys, cal, color="#d62728", label="CAL")
        right.barh(ys, other, left=cal, color="#1f77b4", label="non-CAL")
        right.barh(ys, unp, left=[c + o for c, o in zip(cal, other)], color="#bbbbbb", label="unparseable")
        if gold and "CAL" in gold:
            right.axvline(gold["CAL"], color="black", linestyle="--", linewidth=1, label="gold CAL share")
        right.set_yticks(list(ys))
        right.set_yticklabels(names, fontsize=8)
        right.invert_yaxis()
        right.set_xlim(0, 100)
        right.set_xlabel("% of predictions", fontsize=8)
        right.legend(fontsize=7, frameon=False, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=4)
        right.set_title("CAL vs non-CAL (the paper's Figure 21)", fontsize=9)
        fig.suptitle(title, fontsize=10)
        return self.png(fig)
