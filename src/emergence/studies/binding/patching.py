"""Interchange interventions on the residual stream of a binding model.

A counterfactual pair is one program twice, differing only in the constant on
the query chain's root line, so the answers differ and every token position
stays aligned. Patching the counterfactual run's residual stream into the base
run at one (layer, position) and reading the answer shows where, layer by
layer, the information that decides the answer lives (Wu et al., 2505.20896;
the paper, as our summary gives it: "Causal interventions on residual stream
positions at RHS tokens along query chains cause predictable output changes
with >80% success rates"). Every row carries the chain depth of the patched
token: on a chain line's right-hand side, and on that line's newline (where a
model may keep the value the line assigns), the number of copies between the
root constant and that line (0 = the constant's line); -1 elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import torch
from tqdm import tqdm

from emergence.core.io import PipelineError
from emergence.core.models.hooks import HookedModel
from emergence.studies.binding.batches import encode_programs, parse_program
from emergence.studies.binding.programs import trace
from emergence.studies.binding.tokenizer import CharTokenizer

LINE = 4  # tokens per assignment line: lhs, '=', rhs, newline
POSITION_CLASSES = ("query", "chain_root", "chain_rhs", "chain_newline", "chain_lhs", "other")


def make_counterfactual_pairs(
    df: pd.DataFrame, rng: np.random.Generator, n_pairs: int, n_lines: int | None = None
) -> pd.DataFrame:
    """Up to `n_pairs` (base, cf) pairs from distinct rows of a programs table.

    The cf replaces the digit on the chain's root line (`chain_lines[-1]`) by a
    uniformly drawn different digit. Other lines copying from the root change
    value too; the text changes in exactly one token. All pairs share one
    `n_lines` (so absolute positions mean the same thing): pass it when `df`
    mixes lengths.
    """
    if n_lines is not None:
        df = df[df["n_lines"] == n_lines]
    elif df["n_lines"].nunique() > 1:
        raise PipelineError(f"programs table mixes n_lines {sorted(df['n_lines'].unique())}: pass n_lines")
    if df.empty:
        raise PipelineError(f"programs table: no rows with n_lines={n_lines}")
    rows = df.iloc[rng.choice(len(df), size=min(n_pairs, len(df)), replace=False)]
    shifts = rng.integers(1, 10, size=len(rows))  # new digit = old + shift (mod 10) != old
    records = []
    for (_, row), shift in zip(rows.iterrows(), shifts):
        root = int(row["chain_lines"][-1])
        pos = LINE * root + 2
        base = row["program"]
        cf = f"{base[:pos]}{(int(base[pos]) + shift) % 10}{base[pos + 1 :]}"
        lines, query = parse_program(cf)
        cf_answer, _ = trace(lines, query)
        if cf_answer == row["answer"]:
            raise PipelineError(
                f"programs table: chain_lines {list(row['chain_lines'])} do not end at the "
                f"constant that decides {base!r}"
            )
        records.append(
            dict(
                base=base,
                cf=cf,
                base_answer=int(row["answer"]),
                cf_answer=cf_answer,
                hops=int(row["hops"]),
                chain_lines=[int(c) for c in row["chain_lines"]],
                n_lines=int(row["n_lines"]),
                root_line=root,
                changed_pos=pos,
            )
        )
    return pd.DataFrame(records)


def position_classes(program_text: str, chain_lines: Sequence[int]) -> list[str]:
    """Class of every token position: the query line, the chain's root constant, the
    other chain lines' rhs (the copied variable), every chain line's lhs (the variable
    written) and newline."""
    classes = ["other"] * len(program_text)
    for line in chain_lines:
        classes[LINE * line] = "chain_lhs"
        classes[LINE * line + 2] = "chain_rhs"
        classes[LINE * line + 3] = "chain_newline"
    classes[LINE * chain_lines[-1] + 2] = "chain_root"
    classes[-3:] = ["query"] * 3
    return classes


def chain_depths(program_text: str, chain_lines: Sequence[int]) -> list[int]:
    """Chain depth of every token position: k on the rhs and the newline of the chain line k copies
    below the root (`chain_lines` runs from the query's line down to the root, so the root is depth 0)."""
    depths = [-1] * len(program_text)
    for k, line in enumerate(reversed(chain_lines)):
        depths[LINE * line + 2] = depths[LINE * line + 3] = k
    return depths


def resid_hook_name(n_layers: int, layer: int) -> str:
    """Residual stream entering `layer`; layer == n_layers is the final block's output."""
    if not 0 <= layer <= n_layers:
        raise ValueError(f"layer {layer} outside 0..{n_layers}")
    return f"blocks.{layer}.hook_resid_pre" if layer < n_layers else f"blocks.{n_layers - 1}.hook_resid_post"


def _patched_logits(
    model: HookedModel, idx: torch.Tensor, name: str, positions: Sequence[int], source: torch.Tensor
) -> torch.Tensor:
    """Forward `idx` with activation `name` at `positions` taken from `source` (B, T, d_model)."""
    pos = torch.as_tensor(list(positions), dtype=torch.long)

    def patch(x: torch.Tensor, _: str) -> torch.Tensor:
        x = x.clone()
        x[:, pos] = source[:, pos]
        return x

    with model.hooks([(name, patch)]):
        logits, _ = model(idx.to(source.device))
    return logits  # (B, T, V)


def patch_residual(
    model: HookedModel,
    base_idx: torch.Tensor,
    cf_idx: torch.Tensor,
    layer: int,
    positions: Sequence[int],
    cf_resid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Base-run logits (B, T, V) with the residual stream entering `layer` at `positions`
    replaced by the cf run's (layer == n_layers: the final block's output).
    `cf_resid` (B, T, d_model) reuses a cached cf activation at that hook."""
    with torch.no_grad():
        name = resid_hook_name(model.config.n_layers, layer)
        if cf_resid is None:
            _, cache = model.run_with_cache(cf_idx, [name])
            cf_resid = cache[name]
        return _patched_logits(model, base_idx, name, positions, cf_resid)


def _device(model: HookedModel) -> torch.device:
    """Where the model's weights are: the programs go there, the tallies stay on the host."""
    return next(model.parameters()).device


def answer_digits(logits: torch.Tensor, answer_pos: torch.Tensor, tok: CharTokenizer) -> np.ndarray:
    """Argmax token at each row's answer position as a digit, -1 if not a digit."""
    top = logits[torch.arange(len(logits)), answer_pos].argmax(-1).cpu().numpy()
    digit_of = np.full(logits.shape[-1], -1, dtype=np.int64)
    digit_of[list(tok.digit_ids)] = np.arange(10)
    return digit_of[top]


class _Tally:
    """Per (layer, position, class, chain depth) counts of correct pairs, cf and base predictions.
    Depth index d + 1 holds chain depth d (index 0: not on the chain's right-hand sides)."""

    def __init__(self, n_resid: int, T: int, max_depth: int) -> None:
        shape = (n_resid, T, len(POSITION_CLASSES), max_depth + 2)
        self.n, self.cf, self.base = (np.zeros(shape, dtype=np.int64) for _ in range(3))

    def add(
        self, layer: int, pos: int, cls: np.ndarray, depth: np.ndarray, hit_cf: np.ndarray, hit_base: np.ndarray
    ) -> None:
        # cls, depth: (B,) codes at `pos`; np.add.at accumulates repeated cells.
        cell = (cls, depth + 1)
        np.add.at(self.n[layer, pos], cell, 1)
        np.add.at(self.cf[layer, pos], cell, hit_cf)
        np.add.at(self.base[layer, pos], cell, hit_base)


def _patch_batch(model: HookedModel, batch: pd.DataFrame, tok: CharTokenizer, tally: _Tally) -> int:
    """Patch every (layer, position) for one batch of pairs; returns how many pairs count."""
    enc_b = encode_programs(batch["base"].tolist(), batch["base_answer"].tolist(), tok)
    enc_c = encode_programs(batch["cf"].tolist(), batch["cf_answer"].tolist(), tok)
    n_layers, device = model.config.n_layers, _device(model)
    names = [resid_hook_name(n_layers, layer) for layer in range(n_layers + 1)]
    logits_b, cache_b = model.run_with_cache(enc_b.idx.to(device), names)
    logits_c, cache_c = model.run_with_cache(enc_c.idx.to(device), names)
    ok = torch.from_numpy(
        (answer_digits(logits_b, enc_b.answer_pos, tok) == enc_b.answers.numpy())
        & (answer_digits(logits_c, enc_c.answer_pos, tok) == enc_c.answers.numpy())
    )
    if not ok.any():
        return 0
    idx, answer_pos = enc_b.idx[ok], enc_b.answer_pos[ok]
    base_ans, cf_ans = enc_b.answers[ok].numpy(), enc_c.answers[ok].numpy()
    kept = batch.loc[ok.numpy()]
    cls = np.array(
        [
            [POSITION_CLASSES.index(c) for c in position_classes(text, chain)]
            for text, chain in zip(kept["base"], kept["chain_lines"])
        ]
    )  # (B, T)
    depth = np.array([chain_depths(text, chain) for text, chain in zip(kept["base"], kept["chain_lines"])])  # (B, T)
    for layer, name in enumerate(names):
        src, own = cache_c[name][ok], cache_b[name][ok]  # (B, T, d_model)
        for pos in range(idx.shape[1]):
            # Where the cf activation equals the base one the patch is a no-op: the pair
            # keeps its (correct) base answer without a forward pass. Causality makes this
            # every position before the root constant, and all but it at layer 0. The last
            # block's output reaches the answer only through the answer position itself.
            moved = (src[:, pos] != own[:, pos]).any(-1).cpu()
            if layer == n_layers:
                moved &= answer_pos == pos
            pred = base_ans.copy()
            if moved.any():
                logits = _patched_logits(model, idx[moved], name, [pos], src[moved])
                pred[moved.numpy()] = answer_digits(logits, answer_pos[moved], tok)
            tally.add(layer, pos, cls[:, pos], depth[:, pos], pred == cf_ans, pred == base_ans)
    return int(ok.sum())


def patching_table(
    model: HookedModel, pairs: pd.DataFrame, tok: CharTokenizer, *, seed: int, step: int, batch_size: int = 64
) -> pd.DataFrame:
    """Tidy rows (seed, step, layer, head=-1, position, position_class, chain_depth, metric, value, n).

    Over pairs the model answers correctly in both base and cf runs (n of them
    per row), the fraction whose patched answer is the cf answer
    ("patch_success") or still the base answer ("base_kept"), for every
    (layer, absolute position, class of that position in the pair). One row
    "pairs_correct" (layer = position = -1): the fraction of all pairs kept.
    Layer n_layers patches the final block's output.
    """
    with torch.no_grad():
        lengths = pairs["base"].str.len()
        if lengths.nunique() != 1:
            raise PipelineError("counterfactual pairs: need at least one pair, all of one program length")
        tally = _Tally(model.config.n_layers + 1, int(lengths.iloc[0]), int(pairs["hops"].max()))
        starts = tqdm(range(0, len(pairs), batch_size), desc="patching batches", disable=None)
        n_ok = sum(
            _patch_batch(model, pairs.iloc[s : s + batch_size].reset_index(drop=True), tok, tally) for s in starts
        )
        layer, pos, cls, depth = np.nonzero(tally.n)
        n = tally.n[layer, pos, cls, depth]
        cells = dict(
            seed=seed,
            step=step,
            layer=layer,
            head=-1,
            position=pos,
            position_class=np.array(POSITION_CLASSES, dtype=object)[cls],
            chain_depth=depth - 1,
        )
        rows = [
            pd.DataFrame({**cells, "metric": metric, "value": hits[layer, pos, cls, depth] / n, "n": n})
            for metric, hits in (("patch_success", tally.cf), ("base_kept", tally.base))
        ]
        summary = pd.DataFrame(
            dict(
                seed=[seed],
                step=step,
                layer=-1,
                head=-1,
                position=-1,
                position_class="all",
                chain_depth=-1,
                metric="pairs_correct",
                value=n_ok / max(len(pairs), 1),
                n=len(pairs),
            )
        )
        table = pd.concat([summary, *rows], ignore_index=True)
        return table.astype(
            {
                "seed": "int64",
                "step": "int64",
                "layer": "int64",
                "head": "int64",
                "position": "int64",
                "chain_depth": "int64",
                "value": "float64",
                "n": "int64",
            }
        )


def _head_patch(name_h: int, pos: torch.Tensor, src: torch.Tensor):
    """A hook_z edit: head `name_h`'s output at each row's positions `pos` (B, P) taken from `src`
    (B, T, H, d_head)."""
    rows = torch.arange(len(pos))[:, None]

    def patch(z: torch.Tensor, _: str) -> torch.Tensor:
        z = z.clone()
        z[rows, pos, name_h] = src[rows, pos, name_h]
        return z

    return patch


def head_step_table(
    model: HookedModel, pairs: pd.DataFrame, tok: CharTokenizer, *, seed: int, step: int, batch_size: int = 64
) -> pd.DataFrame:
    """Heads per dereference step: rows (seed, step, layer, head, position=-1, position_class="chain_line",
    chain_depth=k, metric="head_step_success", value, n).

    Step k (chain depth k >= 1) is the link at which the line k copies below the root reads the value of
    the line above it in the chain. For each head, the fraction of the n pairs (both runs answered
    correctly, hops >= k) whose answer switches to the cf answer when only that head's output (hook_z)
    at line k's right-hand side and newline comes from the cf run: the head that writes the moved value
    into line k is the one that moves it one link (ours: the paper names heads per hop; an intervention
    per step, at the line where the step lands, is our reading of "which head moves the value").
    """
    with torch.no_grad():
        n_layers, n_heads = model.config.n_layers, model.config.n_heads
        max_hops = int(pairs["hops"].max())
        hits = np.zeros((n_layers, n_heads, max_hops + 1), dtype=np.int64)
        counts = np.zeros(max_hops + 1, dtype=np.int64)
        names = [f"blocks.{layer}.attn.hook_z" for layer in range(n_layers)]
        device = _device(model)
        for s in tqdm(range(0, len(pairs), batch_size), desc="head steps", disable=None):
            batch = pairs.iloc[s : s + batch_size].reset_index(drop=True)
            enc_b = encode_programs(batch["base"].tolist(), batch["base_answer"].tolist(), tok)
            enc_c = encode_programs(batch["cf"].tolist(), batch["cf_answer"].tolist(), tok)
            logits_b, _ = model(enc_b.idx.to(device))
            logits_c, cache_c = model.run_with_cache(enc_c.idx.to(device), names)
            ok = (answer_digits(logits_b, enc_b.answer_pos, tok) == enc_b.answers.numpy()) & (
                answer_digits(logits_c, enc_c.answer_pos, tok) == enc_c.answers.numpy()
            )
            for k in range(1, max_hops + 1):
                rows = np.flatnonzero(ok & (batch["hops"].to_numpy() >= k))
                if not len(rows):
                    continue
                line = np.array([list(reversed(batch.at[r, "chain_lines"]))[k] for r in rows])
                pos = torch.from_numpy(np.stack([LINE * line + 2, LINE * line + 3], axis=1))  # (B_k, 2): rhs, newline
                idx, answer_pos = enc_b.idx[rows].to(device), enc_b.answer_pos[rows]
                cf_ans = enc_c.answers[rows].numpy()
                counts[k] += len(rows)
                for layer, name in enumerate(names):
                    src = cache_c[name][rows]
                    for h in range(n_heads):
                        with model.hooks([(name, _head_patch(h, pos, src))]):
                            logits, _ = model(idx)
                        hits[layer, h, k] += int((answer_digits(logits, answer_pos, tok) == cf_ans).sum())
        layer, head, depth = np.nonzero(np.broadcast_to(counts > 0, hits.shape))
        return pd.DataFrame(
            dict(seed=seed, step=step, layer=layer, head=head, position=-1, position_class="chain_line",
                 chain_depth=depth, metric="head_step_success", value=hits[layer, head, depth] / counts[depth],
                 n=counts[depth])
        ).astype({"seed": "int64", "step": "int64", "layer": "int64", "head": "int64", "position": "int64",
                  "chain_depth": "int64", "value": "float64", "n": "int64"})  # fmt: skip
