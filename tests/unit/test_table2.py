"""The paper's Table 2 at CPU scale: checkpoints nearest 1/4, 1/2 and all of training, aggregate-head
counts and mean layers over seeds, ablation surprisals; expected values worked out by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from emergence.studies.grounding.report_mech import nearest_steps, table2


def test_nearest_steps():
    # last = 1000: 250 -> 200 (|50|) over 300 (|50|, later), 500 -> 500, 1000 -> 1000
    assert nearest_steps([0, 100, 200, 300, 500, 1000]) == [200, 500, 1000]
    # last = 7: 1.75 -> 0; 3.5 is as far from 0 as from 7, so the earlier step
    assert nearest_steps([0, 7]) == [0, 0, 7]


def test_table2_by_hand():
    steps = [0, 250, 500, 750, 1000]
    saliency = pd.DataFrame(
        [(m, s, t) for m in ["tf"] for s in (0, 1) for t in steps], columns=["model", "seed", "step"]
    )
    heads = pd.DataFrame(
        [  # (model, seed, step, layer, head, kind)
            ("tf", 0, 250, 1, 0, "aggregate"),
            ("tf", 0, 250, 3, 1, "aggregate"),  # seed 0 at 250: 2 heads, mean layer 2
            ("tf", 1, 250, 2, 0, "gather"),  # a gather head does not count; seed 1 has no aggregate head
            ("tf", 0, 1000, 0, 0, "aggregate"),
            ("tf", 1, 1000, 2, 2, "aggregate"),
            ("tf", 1, 1000, 3, 0, "aggregate"),  # at 1000: counts 1 and 2 -> 1.5; mean layers 0 and 2.5 -> 1.25
        ],
        columns=["model", "seed", "step", "layer", "head", "kind"],
    )
    rows = []
    for seed in (0, 1):
        for step in steps:
            for ctx in range(2):
                has = (seed == 0 and step == 250) or step == 1000
                rows.append(
                    dict(model="tf", seed=seed, step=step, kind="aggregate", context=ctx, n_heads=int(has),
                         n_control_heads=int(has), original=1.0 + ctx,
                         intervention=(3.0 + seed if has else np.nan), control=(1.5 if has else np.nan))
                )  # fmt: skip
    ablation = pd.DataFrame(rows)
    t = table2(heads, saliency, ablation).set_index("step")
    assert t.index.tolist() == [250, 500, 1000]
    assert t.loc[250, "aggregate heads"] == 1.0 and t.loc[250, "mean layer"] == 2.0
    assert t.loc[500, "aggregate heads"] == 0.0 and np.isnan(t.loc[500, "intervention"])
    assert t.loc[1000, "aggregate heads"] == 1.5 and t.loc[1000, "mean layer"] == pytest.approx(1.25)
    # at 250 only seed 0 has heads: intervention 3, original over its two contexts (1 + 2) / 2
    assert t.loc[250, "intervention"] == 3.0 and t.loc[250, "original"] == 1.5
    # at 1000 both seeds: intervention (3 + 4) / 2, control 1.5
    assert t.loc[1000, "intervention"] == 3.5 and t.loc[1000, "control"] == 1.5
