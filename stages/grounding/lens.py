"""Tuned lens of one run: an affine translator per layer, trained at a few checkpoints, then the
grounding gain read out at every layer (through the tuned lens and, for reference, the logit lens)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from tqdm import tqdm

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import load_checkpoint
from emergence.interp.tuned_lens import layer_kl, layer_surprisal, train_lens
from emergence.studies.grounding import inputs
from emergence.studies.grounding.gain import evaluation_pairs, gain_table
from emergence.studies.grounding.lens import GroundingLensParams
from emergence.studies.grounding.settings import Setting


def lens_rows(model, lens, windows: np.ndarray, eval_set: pd.DataFrame, pairs) -> pd.DataFrame:
    """Per layer (n_layers = the model's own output): mean matched/mismatched surprisal, G and KL
    (on `windows`, the training windows the lens quality is measured on)."""
    surprisal = layer_surprisal(model, lens, pairs.contexts, pairs.targets)  # (L + 1, P)
    kl = np.append(layer_kl(model, lens, windows), 0.0)
    rows = []
    for layer, s in enumerate(surprisal):
        t = gain_table(eval_set, pairs, s).groupby("word")[["s_matched", "s_mismatched", "gain"]].mean()
        rows.append({"layer": layer, **t.mean().to_dict(), "kl": float(kl[layer])})
    return pd.DataFrame(rows)


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_model=True)
    run = Setting("childes").run(args.model, args.seed)  # the lens reads transcripts: text runs only
    p = from_dict(GroundingLensParams, section(params, "grounding_lens"), "grounding_lens")
    _, index = inputs.vocab_index(params)
    eval_set = inputs.eval_set(params)
    pairs = evaluation_pairs(eval_set, index)
    windows = inputs.train_windows(params, index)[:, :-1]  # (N, seq_len) model inputs
    tables = []
    for step, path in tqdm(
        inputs.spread_checkpoints(inputs.run_checkpoints(params, run), p.n_checkpoints), desc=f"tuned lens {run}"
    ):
        model = load_checkpoint(path)[0]
        lens, _ = train_lens(model, windows, p)
        for name, readout in (("tuned", lens), ("logit", None)):
            tables.append(
                lens_rows(model, readout, windows[: p.kl_windows], eval_set, pairs).assign(step=step, lens=name)
            )
    out = pd.concat(tables, ignore_index=True).assign(model=args.model, seed=args.seed)
    first = ["model", "seed", "step", "lens", "layer"]
    write_parquet(
        out[first + [c for c in out.columns if c not in first]], inputs.run_file(params, "grounding_lens", run)
    )


if __name__ == "__main__":
    raise SystemExit(main())
