"""Tuned lens (Belrose et al., arXiv 2303.08112): read each layer's residual stream as a prediction.

For every layer l < L of a frozen LM, an affine translator T_l(h) = h + A_l h + b_l
maps the residual stream entering block l (`blocks.{l}.hook_resid_pre`) into
the space the model's own readout (final norm + unembedding) expects. A_l and
b_l start at zero, so an untrained lens is the logit lens; training minimises
KL(p_final || softmax(readout(T_l(h_l)))) averaged over token positions.
Layer L is the model's own output. Only residual hooks and `readout` are used,
so every zoo LM (transformer, mamba2, lstm) works.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
import torch.nn as nn
import torch.nn.functional as F
from tqdm import tqdm

from emergence.interp.lens_params import LensParams
from emergence.interp.padding import right_pad


def resid_names(model: nn.Module) -> list[str]:
    return [f"blocks.{l}.hook_resid_pre" for l in range(model.config.n_layers)]


class TunedLens(nn.Module):
    """One affine translator per layer, as a residual correction to the identity."""

    def __init__(self, n_layers: int, d_model: int):
        super().__init__()
        self.translators = nn.ModuleList(nn.Linear(d_model, d_model) for _ in range(n_layers))
        for translator in self.translators:
            nn.init.zeros_(translator.weight)
            nn.init.zeros_(translator.bias)

    def forward(self, resid: torch.Tensor, layer: int) -> torch.Tensor:
        return resid + self.translators[layer](resid)  # (..., d_model)


def _log_probs(model: nn.Module, lens: TunedLens | None, resid: torch.Tensor, layer: int) -> torch.Tensor:
    """Float32 log-probs (..., V) of a residual stream read at `layer`; no lens = the logit lens."""
    read = resid if lens is None else lens(resid, layer)
    return model.readout(read).float().log_softmax(-1)


def _kl(teacher: torch.Tensor, student: torch.Tensor) -> torch.Tensor:
    """KL(teacher || student) per position from log-probs: (..., V) -> (...)."""
    return F.kl_div(student, teacher, log_target=True, reduction="none").sum(-1)


def _device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


def train_lens(model: nn.Module, windows: np.ndarray, params: LensParams) -> tuple[TunedLens, pd.DataFrame]:
    """Fit a tuned lens to a frozen model on (N, T) token windows.

    Returns the lens and a history table (step, layer, kl). The model's weights
    are untouched and its requires_grad flags restored; it is left in eval mode
    (the teacher must not see dropout).
    """
    device, L = _device(model), model.config.n_layers
    data = torch.as_tensor(np.asarray(windows), dtype=torch.long)  # (N, T), kept on the CPU
    lens = TunedLens(L, model.config.d_model).to(device)
    opt = torch.optim.Adam(lens.parameters(), lr=params.lr)
    # The batch draws use their own generator: same params, same lens, whatever else ran before.
    gen = torch.Generator().manual_seed(params.seed)
    names = resid_names(model)
    flags = [p.requires_grad for p in model.parameters()]
    model.eval().requires_grad_(False)
    rows = []
    try:
        for step in tqdm(range(params.steps), desc="tuned lens", leave=False, disable=None):
            idx = data[torch.randint(0, len(data), (params.batch_size,), generator=gen)].to(device)  # (B, T)
            with torch.no_grad():
                logits, cache = model.run_with_cache(idx, names)
                teacher = logits.float().log_softmax(-1)  # (B, T, V)
            kls = torch.stack(
                [_kl(teacher, _log_probs(model, lens, cache[name], l)).mean() for l, name in enumerate(names)]
            )  # (L,)
            opt.zero_grad(set_to_none=True)
            kls.sum().backward()
            opt.step()
            rows += [(step, l, kl) for l, kl in enumerate(kls.tolist())]
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)
    return lens, pd.DataFrame(rows, columns=["step", "layer", "kl"])


def layer_kl(model: nn.Module, lens: TunedLens | None, windows: np.ndarray, batch_size: int = 64) -> np.ndarray:
    """(L,) mean KL(final || lens at layer l) over every token of the (N, T) windows."""
    with torch.no_grad():
        device, names = _device(model), resid_names(model)
        data = torch.as_tensor(np.asarray(windows), dtype=torch.long)
        total = torch.zeros(len(names), dtype=torch.float64)
        for start in range(0, len(data), batch_size):
            logits, cache = model.run_with_cache(data[start : start + batch_size].to(device), names)
            teacher = logits.float().log_softmax(-1)  # (B, T, V)
            for l, name in enumerate(names):
                total[l] += _kl(teacher, _log_probs(model, lens, cache[name], l)).sum().double().cpu()
        return (total / data.numel()).numpy()


def layer_surprisal(
    model: nn.Module,
    lens: TunedLens | None,
    contexts: Sequence[Sequence[int]],
    targets: Sequence[int],
    batch_size: int = 256,
) -> np.ndarray:
    """(L + 1, N): -ln p(target_n | context_n) read at each context's last real token, layer by layer.

    Rows l < L go through the lens at layer l, row L is the model's own output.
    Contexts are right-padded with 0: every zoo model is causal, so padding
    after the last real token cannot change what it reads.
    """
    with torch.no_grad():
        device, names = _device(model), resid_names(model)
        out = []
        for start in range(0, len(contexts), batch_size):
            chunk = contexts[start : start + batch_size]
            idx, lengths = right_pad(chunk, device)
            logits, cache = model.run_with_cache(idx, names)
            rows, last = torch.arange(len(chunk), device=device), lengths - 1
            logps = [_log_probs(model, lens, cache[name][rows, last], l) for l, name in enumerate(names)]
            logps.append(logits[rows, last].float().log_softmax(-1))  # L + 1 of (B, V)
            tgt = torch.tensor(targets[start : start + batch_size], device=device)
            out.append(-torch.stack(logps)[:, rows, tgt].cpu().numpy())  # (L + 1, B)
        return np.concatenate(out, axis=1) if out else np.zeros((len(names) + 1, 0))
