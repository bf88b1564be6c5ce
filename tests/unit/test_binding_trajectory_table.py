"""trajectory_table over checkpoints whose predictions are known by construction."""

from __future__ import annotations

import pandas as pd
import torch

from emergence.studies.binding.batches import encode_programs
from emergence.studies.binding.heuristics import HEURISTICS
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.trajectory import trajectory_table

TOK = CharTokenizer()
# (text, answer, hops, first constant)
PROGRAMS = [
    ("a=1\nb=a\n#b:", 1, 1, 1),
    ("a=2\nb=3\n#b:", 3, 0, 2),  # the first constant is wrong here only
    ("c=4\na=c\nb=a\n#b:", 4, 2, 4),
    ("a=5\nb=6\n#a:", 5, 0, 5),
]


class Scripted(torch.nn.Module):
    """Puts all its mass on one token per program: the program's character at position 2 (its
    first constant), or a fixed token."""

    def __init__(self, token: int | None):
        super().__init__()
        self.token = token
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # predict_answers reads the device from it

    def forward(self, idx):
        chosen = idx[:, 2] if self.token is None else torch.full((len(idx),), self.token)
        logits = torch.nn.functional.one_hot(chosen, len(TOK)).float()[:, None, :].expand(-1, idx.shape[1], -1)
        return logits, None


def programs_frame() -> pd.DataFrame:
    df = pd.DataFrame({"answer": [p[1] for p in PROGRAMS], "hops": [p[2] for p in PROGRAMS]})
    for name in HEURISTICS:
        df[f"heur_{name}"] = -1  # no guess: no follow row
    df["heur_first_constant"] = [p[3] for p in PROGRAMS]
    return df


def test_one_block_of_rows_per_checkpoint_in_order():
    data = encode_programs([p[0] for p in PROGRAMS], [p[1] for p in PROGRAMS], TOK)
    checkpoints = (
        (step, model)
        for step, model in [(0, Scripted(TOK.encode("#")[0])), (10, Scripted(TOK.digit_ids[5])), (30, Scripted(None))]
    )
    traj = trajectory_table(checkpoints, data, programs_frame(), TOK, seed=4)
    assert set(traj["seed"]) == {4}
    assert list(dict.fromkeys(traj["step"])) == [0, 10, 30]
    acc = traj[traj["metric"] == "accuracy"].pivot(index="step", columns="hops", values="value")
    # step 0: no digit at all (-1); step 10: always 5, right on the last program only (hop 0);
    # step 30: the first constant, right everywhere but the second program (hop 0).
    assert acc.to_dict("index") == {
        0: {-1: 0.0, 0: 0.0, 1: 0.0, 2: 0.0},
        10: {-1: 0.25, 0: 0.5, 1: 0.0, 2: 0.0},
        30: {-1: 0.75, 0: 0.5, 1: 1.0, 2: 1.0},
    }
    rows = traj.set_index(["step", "metric"])
    assert rows.loc[(30, "agree_first_constant"), "value"] == 1.0
    assert rows.loc[(30, "follow_first_constant"), "value"] == 1.0 and rows.loc[(30, "follow_first_constant"), "n"] == 1
    assert rows.loc[(10, "agree_first_constant"), "value"] == 0.25
    assert rows.loc[(10, "follow_first_constant"), "value"] == 0.0
    assert rows.loc[(0, "agree_last_constant"), "value"] == 1.0  # both -1: the model's non-digit
    assert not any(traj["metric"].eq("follow_last_constant"))
    assert len(traj) == 3 * (4 + len(HEURISTICS) + 1)  # per step: 4 accuracies, the agreements, one follow
