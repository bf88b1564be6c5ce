"""The local learning coefficient (LLC) of saved checkpoints, by devinterp's SGLD estimator.

devinterp 2.0.1 (`devinterp.slt.llc.llc`, `compute_llc`): from the checkpoint's weights w*, SGLD
chains draw weights w near w* (`localization` pulls them back, `n_beta` is the inverse temperature
n*beta); the estimate is

    LLC = n_beta * (mean loss over the chains' draws - loss at w*),

per chain, then mean and spread over chains. A model whose loss rises fast in many directions around
w* has a high LLC; a degenerate one (directions along which the loss does not change) a low one.
Sequences here may carry their own targets: `packed` puts (input ids | targets) side by side in one
row, so the sampler's loss is the training objective itself (targets equal to `ignore` carry none).
"""

from __future__ import annotations

import contextlib
import gc
import math
import tempfile
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from tqdm import tqdm

from emergence.core.io import PipelineError
from emergence.core.train.checkpoint import diverged_at, load_checkpoint
from emergence.interp.llc_params import LLCParams

LossFn = Callable[[torch.nn.Module, torch.Tensor], torch.Tensor]  # (model, (B, L) rows) -> (B, L - 1)


def every_kth(checkpoints: list, k: int) -> list:
    """Every k-th of the saved checkpoints, the first and the last always."""
    return [c for i, c in enumerate(checkpoints) if i % k == 0 or i == len(checkpoints) - 1]


def packed(idx: torch.Tensor, targets: torch.Tensor, ignore: int) -> tuple[torch.Tensor, LossFn]:
    """Rows (ids | targets), (N, 2T), and the loss the sampler reads from them: each row's mean
    cross-entropy over its targets, repeated over the row (the estimator averages over positions)."""
    T = idx.shape[1]

    def loss_fn(model: torch.nn.Module, rows: torch.Tensor) -> torch.Tensor:
        ids, tgt = rows[:, :T], rows[:, T:]
        per = F.cross_entropy(model(ids)[0].transpose(1, 2), tgt.clamp(min=0), reduction="none")  # (B, T)
        mask = (tgt != ignore).float()
        row = (per * mask).sum(1) / mask.sum(1).clamp(min=1)  # (B,)
        return row[:, None].expand(-1, rows.shape[1] - 1)

    return torch.cat([idx, targets], dim=1), loss_fn


def next_token(windows: torch.Tensor) -> tuple[torch.Tensor, LossFn]:
    """Rows of a language model's training windows, (N, T), and its next-token loss, (B, T - 1)."""

    def loss_fn(model: torch.nn.Module, rows: torch.Tensor) -> torch.Tensor:
        logits = model(rows[:, :-1])[0]  # (B, T - 1, V)
        return F.cross_entropy(logits.transpose(1, 2), rows[:, 1:], reduction="none")

    return windows, loss_fn


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """devinterp runs a full gc.collect() around each chain; with torch, pandas and transformers loaded that
    walks ~10^6 objects (~0.2 s each time, most of a tiny LLC stage's sampling). What is alive before the
    chains is hidden from the collector while they run (gc.freeze), and handed back after."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def estimate(model: torch.nn.Module, rows: torch.Tensor, loss_fn: LossFn, p: LLCParams, seed: int) -> pd.DataFrame:
    """One checkpoint's LLC per chain: columns chain, llc, drift, init_loss. PipelineError naming the chain
    and SGLD step where a chain's loss went non-finite (its draws would make a number of nothing)."""
    from datasets import Dataset
    from devinterp.slt.llc import compute_llc
    from devinterp.slt.sampling import sample

    if len(rows) < p.batch_size:  # fewer than n_sequences exist: the sampler would stop on an empty batch
        raise PipelineError(f"llc.batch_size: {p.batch_size}, but only {len(rows)} sequences exist to draw from")
    data = Dataset.from_dict({"input_ids": rows.tolist()}).with_format("torch")

    def deterministic_loss(model: torch.nn.Module, rows: torch.Tensor) -> torch.Tensor:
        # devinterp sets train mode for its chains (sampler.py: model.train()): dropout (the paper
        # profile's 0.1) would scatter every draw's loss and the initial loss with it. The LLC is of
        # the checkpoint's own loss function, so each evaluation runs in eval mode.
        model.eval()
        return loss_fn(model, rows)

    with tempfile.TemporaryDirectory(prefix="llc-") as tmp, warnings.catch_warnings(), heap_frozen():
        warnings.simplefilter("ignore")  # a failed chain warns: it is reported below, with its step
        samples = sample(
            model=model,
            dataset=data,
            observables={},
            lr=p.lr,
            n_beta=p.n_beta,
            num_chains=p.num_chains,
            num_draws=p.num_draws,
            batch_size=p.batch_size,
            localization=p.localization,
            init_seed=seed,
            num_init_loss_batches=min(8, len(rows) // p.batch_size),  # >= 1: refused above otherwise
            device="cpu" if next(model.parameters()).device.type == "cpu" else None,
            output_path=Path(tmp) / "samples.zarr",
            loss_fn=deterministic_loss,
        )
        result = compute_llc(samples)
        trace = result.loss_trace.values  # (chain, step)
        per_chain = result.llc_per_chain.values
        init = float(result.init_loss)
    for chain, (llc, losses) in enumerate(zip(per_chain, trace)):
        # devinterp stops a chain whose loss turned nan or inf and leaves its later steps unwritten (nan),
        # which xarray's mean then skips: the chain's number would come from its first steps alone
        bad = [i for i, v in enumerate(losses) if not math.isfinite(v)]
        if bad or not math.isfinite(llc):
            at = f"SGLD step {bad[0]}" if bad else "its draws"
            raise PipelineError(
                f"llc: chain {chain} diverged at {at} (loss not finite); lower llc.lr or raise llc.localization"
            )
    chains = {"chain": range(len(per_chain)), "llc": per_chain.astype(float), "drift": drift(trace, p.n_beta)}
    return pd.DataFrame({**chains, "init_loss": init})


def drift(trace: np.ndarray, n_beta: float) -> np.ndarray:
    """Per chain (rows of the loss trace, (chains, draws)): n_beta * (mean loss over the last quarter of
    the draws - mean over the quarter before), in LLC units. devinterp advises reading an LLC only from
    chains whose loss has levelled off: then this is near 0; a chain still climbing gives a positive
    drift, one still walking downhill a negative one. nan with fewer than 4 draws."""
    q = trace.shape[1] // 4
    if q == 0:
        return np.full(trace.shape[0], np.nan)
    return n_beta * (trace[:, -q:].mean(1) - trace[:, -2 * q : -q].mean(1))


def finite_checkpoints(checkpoints: list[tuple[int, Path]]) -> Iterator[tuple[int, torch.nn.Module]]:
    """(step, model) of each checkpoint saved before its run diverged, with a progress bar. A run trained
    on past a nan loss (on_nonfinite: continue) records the step in every later checkpoint's meta; an
    LLC of its weights from then on means nothing (SGLD diverges at once), and the report says where
    the run diverged instead."""
    for step, path in tqdm(checkpoints, desc="llc checkpoints"):
        model, info = load_checkpoint(path)
        if diverged_at(info) is not None:
            return
        yield step, model


def llc_table(
    checkpoints: Iterable[tuple[int, torch.nn.Module]], rows: torch.Tensor, loss_fn: LossFn, p: LLCParams, seed: int
) -> pd.DataFrame:
    """Every checkpoint's per-chain LLC: columns step, chain, llc, drift, init_loss (no rows without a
    checkpoint). A diverged chain stops it with one line naming the checkpoint step too (no table is
    returned: nothing is written)."""
    g = torch.Generator().manual_seed(seed)
    rows = rows[torch.randperm(len(rows), generator=g)[: p.n_sequences]]
    tables = []
    for step, model in checkpoints:
        try:
            tables.append(estimate(model, rows, loss_fn, p, seed).assign(step=step))
        except PipelineError as e:
            raise PipelineError(f"{e} at checkpoint step {step}") from None
    if not tables:  # a run that diverged before its first checkpoint
        return pd.DataFrame({"step": [], "chain": [], "llc": [], "drift": [], "init_loss": []}).astype(
            {"step": int, "chain": int}
        )
    return pd.concat(tables, ignore_index=True)[["step", "chain", "llc", "drift", "init_loss"]]


def llc_curve(table: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean and spread over chains per checkpoint: columns *by, step, llc, llc_sd, drift (the chains'
    mean), n_chains."""
    g = table.groupby([*by, "step"])
    return pd.DataFrame(
        {"llc": g["llc"].mean(), "llc_sd": g["llc"].std(), "drift": g["drift"].mean(), "n_chains": g.size()}
    ).reset_index()


SETTLED = 0.1  # a checkpoint's chains count as levelled off where |drift| <= SETTLED * |llc|


def unsettled_note(curve: pd.DataFrame) -> str:
    """One sentence for a page: at how many checkpoints of `curve` the chains had not levelled off."""
    moving = curve[~(curve["drift"].abs() <= SETTLED * curve["llc"].abs())]
    if moving.empty:
        return f"At every checkpoint the chains' loss had levelled off (|drift| <= {SETTLED:.0%} of |LLC|)."
    return (
        f"At {len(moving)} of {len(curve)} checkpoints the chains' loss had not levelled off (|drift| > "
        f"{SETTLED:.0%} of |LLC|, drift in the table): read those LLCs as rough; more llc.num_draws settles them."
    )


def largest_rise(curve: pd.DataFrame) -> tuple[int, int] | None:
    """(from step, to step) of the largest rise of the mean LLC between consecutive checkpoints of one
    run (curve sorted or not); None with fewer than two checkpoints."""
    c = curve.sort_values("step")
    if len(c) < 2:
        return None
    rise = c["llc"].diff().to_numpy()[1:]
    i = int(rise.argmax())
    return int(c["step"].iloc[i]), int(c["step"].iloc[i + 1])
