"""Matplotlib figures for report pages, drawn from already-aggregated tables.

Figures are built on `matplotlib.figure.Figure` with the Agg canvas (no pyplot,
no global state), under a fixed style so a user's matplotlibrc cannot change
the bytes; `html.figure` embeds them as PNG without timestamps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

import matplotlib as mpl
import numpy as np
import pandas as pd

if TYPE_CHECKING:
    from matplotlib.figure import Figure

PHASE_COLOURS = {"random": "#bbbbbb", "heuristic": "#f5b041", "traversal": "#58d68d"}
CLASS_COLOURS = {
    "query": "#c0392b",
    "chain_root": "#f39c12",
    "chain_rhs": "#2e86c1",
    "chain_newline": "#1abc9c",
    "chain_lhs": "#8e44ad",
    "other": "#d5d8dc",
}


@contextlib.contextmanager
def plot_style() -> Iterator[None]:
    with mpl.rc_context():
        mpl.rcdefaults()
        mpl.rcParams.update({"font.size": 9, "axes.titlesize": 10, "legend.fontsize": 8})
        yield


def _patch(**kw):  # a legend swatch; imported when drawn, as new_figure's Figure
    from matplotlib.patches import Patch

    return Patch(**kw)


def new_figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kw) -> tuple[Figure, np.ndarray]:
    # matplotlib's figure machinery takes ~0.4 s to import, and every stage imports the report modules (for
    # their params rules) where only a report stage draws: it is imported here, when a page is drawn.
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=False, **kw)
    return fig, axes


def step_axis(ax, steps: pd.Series) -> None:
    """Log-like x for checkpoints spanning > 2 decades; symlog keeps step 0 visible."""
    positive = steps[steps > 0]
    if len(positive) and steps.max() / positive.min() > 100:
        ax.set_xscale("symlog", linthresh=float(positive.min()), linscale=0.5)
        ax.set_xlim(0, steps.max() * 1.1)
    ax.set_xlabel("training step")


def trajectory(acc: pd.DataFrame, agree: pd.DataFrame, bands: pd.DataFrame) -> Figure:
    """One panel per seed: accuracy, heuristic-agreement curves and shaded phase bands.

    acc: seed, step, value; agree: seed, step, heuristic, value;
    bands: seed, name, start, end (reached phases only, end already resolved).
    """
    seeds = sorted(acc["seed"].unique())
    heuristics = sorted(agree["heuristic"].unique())
    colours = mpl.colormaps["tab10"]
    with plot_style():
        fig, axes = new_figure(8, 2.4 * len(seeds), len(seeds), 1, sharex=True)
        for ax, seed in zip(axes[:, 0], seeds):
            for b in bands[bands["seed"] == seed].itertuples():
                ax.axvspan(b.start, b.end, color=PHASE_COLOURS[b.name], alpha=0.25, lw=0)
            for i, h in enumerate(heuristics):
                d = agree[(agree["seed"] == seed) & (agree["heuristic"] == h)].sort_values("step")
                ax.plot(d["step"], d["value"], ls="--", lw=1, color=colours(i + 1), label=f"agrees: {h}")
            d = acc[acc["seed"] == seed].sort_values("step")
            ax.plot(d["step"], d["value"], lw=2, color="black", marker=".", label="accuracy")
            ax.axhline(0.1, color="grey", lw=0.8, ls=":")
            ax.set_ylim(-0.02, 1.02)
            ax.set_ylabel(f"seed {seed}")
        step_axis(axes[-1, 0], acc["step"])
        handles, labels = axes[0, 0].get_legend_handles_labels()
        handles += [_patch(color=c, alpha=0.25) for c in PHASE_COLOURS.values()]
        labels += [f"phase: {n}" for n in PHASE_COLOURS]
        fig.legend(handles, labels, loc="outside right upper")
    return fig


def lines_by_class(df: pd.DataFrame, ylabel: str, legend_title: str) -> Figure:
    """One line per class over training. df: step, cls, value."""
    with plot_style():
        fig, axes = new_figure(7, 3.2)
        ax = axes[0, 0]
        cmap = mpl.colormaps["viridis"]
        classes = sorted(df["cls"].unique())
        for i, c in enumerate(classes):
            d = df[df["cls"] == c].sort_values("step")
            shade = 0.85 * i / max(len(classes) - 1, 1)  # stop before viridis' pale yellow end
            ax.plot(d["step"], d["value"], marker=".", color=cmap(shade), label=str(c))
        step_axis(ax, df["step"])
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel(ylabel)
        fig.legend(title=legend_title, loc="outside right upper")
    return fig


def bars(df: pd.DataFrame, xlabel: str, ylabel: str, chance: float | None = None) -> Figure:
    """Bar per row with an sd error bar. df: label, mean, sd (NaN sd draws no bar)."""
    with plot_style():
        fig, axes = new_figure(5, 3)
        ax = axes[0, 0]
        x = np.arange(len(df))
        ax.bar(x, df["mean"], yerr=df["sd"].fillna(0), capsize=3, color="#5d6d7e")
        ax.set_xticks(x, [str(v) for v in df["label"]])
        if chance is not None:
            ax.axhline(chance, color="grey", ls=":", label=f"chance {chance:g}")
            ax.legend()
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
    return fig


def _heatmap(ax, mat: pd.DataFrame, title: str, cmap: str, vmin: float, vmax: float, annotate: bool):
    im = ax.imshow(mat.to_numpy(dtype=float), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto", interpolation="nearest")
    ax.set_xticks(range(mat.shape[1]), [str(c) for c in mat.columns])
    ax.set_yticks(range(mat.shape[0]), [str(r) for r in mat.index])
    ax.set_xlabel(str(mat.columns.name))
    ax.set_ylabel(str(mat.index.name))
    ax.set_title(title)
    if annotate:
        for (i, j), v in np.ndenumerate(mat.to_numpy(dtype=float)):
            if not np.isnan(v):
                r, g, b, _ = im.cmap(im.norm(v))
                dark = 0.299 * r + 0.587 * g + 0.114 * b < 0.5  # perceived luminance of the cell
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, color="white" if dark else "black")
    return im


def heatmap(mat: pd.DataFrame, title: str, vmin: float = 0.0, vmax: float = 1.0) -> Figure:
    """A single annotated heat map; rows/columns as in `mat` (named index/columns become axis labels)."""
    with plot_style():
        fig, axes = new_figure(max(4.0, 0.4 * mat.shape[1] + 2), max(3.0, 0.3 * mat.shape[0] + 1.5))
        im = _heatmap(axes[0, 0], mat, title, "viridis", vmin, vmax, annotate=mat.size <= 400)
        fig.colorbar(im, ax=axes[0, 0], shrink=0.8)
    return fig


def heatmap_grid(panels: dict[tuple[str, str], pd.DataFrame]) -> Figure:
    """Row x column grid of diverging heat maps sharing one symmetric colour scale.

    panels: (row title, column title) -> matrix; used for accuracy drops, where
    negative values (ablation helps) must stay distinguishable from positive.
    """
    rows = list(dict.fromkeys(r for r, _ in panels))
    cols = list(dict.fromkeys(c for _, c in panels))
    vmax = max(float(np.nanmax(np.abs(m.to_numpy(dtype=float)))) for m in panels.values()) or 1.0
    with plot_style():
        fig, axes = new_figure(3.6 * len(cols) + 1, 3 * len(rows), len(rows), len(cols))
        for (r, c), mat in panels.items():
            im = _heatmap(
                axes[rows.index(r), cols.index(c)], mat, f"{r}: {c}", "RdBu_r", -vmax, vmax, annotate=mat.size <= 64
            )
        fig.colorbar(im, ax=axes, shrink=0.6)
    return fig


def patching(mat: pd.DataFrame, classes: pd.Series) -> Figure:
    """Layer x position heat map with a colour strip marking each position's class.

    mat: index layer, columns position; classes: position -> position_class.
    """
    with plot_style():
        fig, axes = new_figure(
            min(12.0, max(6.0, 0.16 * mat.shape[1] + 3)),
            0.35 * mat.shape[0] + 2.2,
            2,
            1,
            sharex=True,
            gridspec_kw={"height_ratios": [1, max(mat.shape[0], 1)]},
        )
        strip, ax = axes[0, 0], axes[1, 0]
        names = list(CLASS_COLOURS)
        codes = np.array([[names.index(classes[p]) for p in mat.columns]])
        strip.imshow(
            codes,
            cmap=mpl.colors.ListedColormap(list(CLASS_COLOURS.values())),
            vmin=0,
            vmax=len(names) - 1,
            aspect="auto",
            interpolation="nearest",
        )
        strip.set_yticks([])
        strip.set_title("position class")
        strip.legend(
            [_patch(color=c) for c in CLASS_COLOURS.values()],
            names,
            ncols=len(names),
            loc="lower center",
            bbox_to_anchor=(0.5, 1.3),
            frameon=False,
        )
        im = _heatmap(ax, mat, "patch success (mean over seeds)", "viridis", 0.0, 1.0, annotate=False)
        fig.colorbar(im, ax=axes[:, 0], shrink=0.8)  # both axes shrink alike, so the strip stays aligned
        step = max(1, mat.shape[1] // 40)  # keep tick labels legible on long programs
        ax.set_xticks(range(0, mat.shape[1], step), [str(c) for c in mat.columns[::step]], fontsize=7, rotation=90)
    return fig
