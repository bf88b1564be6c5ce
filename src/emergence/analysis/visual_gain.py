"""Image-grounded gain: does the dialogue's own image lower the surprisal of v<LAN>?

G(v) = mean_n mean_{images i without v} [ s(v<LAN> | i, c_n) - s(v<LAN> | own image, c_n) ],
c_n the held-out dialogue cut before v<LAN> (caption removed), the image read as
a prefix of DINOv2 features. Same tables as the text gain (`gain_table`).
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from emergence.analysis.grounding_gain import EvalPairs, gain_table, target_surprisal
from emergence.data.grounding import encode, lan
from emergence.io import PipelineError


def image_pairs(eval_set: pd.DataFrame, index: dict[str, int],
                image_row: dict[int, int]) -> tuple[EvalPairs, np.ndarray]:
    """Image-setting pairs: each held-out dialogue context with its own image (matched), then with
    each of its `other_images`; and the feature row of every pair's image."""
    contexts, targets, rows, matched, feature_rows = [], [], [], [], []
    for row, (context, word, own, others) in enumerate(zip(eval_set["image_context"], eval_set["word"],
                                                           eval_set["image_id"], eval_set["other_images"])):
        ids = encode(context, index)
        for image in [own, *others]:
            if int(image) not in image_row:
                raise PipelineError(f"visual features: no features for image_id {int(image)}")
            contexts.append(ids)
            targets.append(index[lan(word)])
            rows.append(row)
            matched.append(image == own)
            feature_rows.append(image_row[int(image)])
    pairs = EvalPairs(contexts, targets, np.array(rows, dtype=np.int64), np.array(matched, dtype=bool))
    return pairs, np.array(feature_rows, dtype=np.int64)


def image_gain_rows(model: torch.nn.Module, eval_set: pd.DataFrame, index: dict[str, int],
                    features: torch.Tensor, image_row: dict[int, int]) -> pd.DataFrame:
    """One row per evaluation context: s_matched (own image), s_mismatched (other images), gain."""
    pairs, feature_rows = image_pairs(eval_set, index, image_row)
    prefixes = features[torch.from_numpy(feature_rows)]                   # (pairs, P, d)
    return gain_table(eval_set, pairs, target_surprisal(model, pairs.contexts, pairs.targets, prefixes=prefixes))
