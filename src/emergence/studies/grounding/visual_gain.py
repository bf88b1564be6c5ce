"""Image-grounded gain: does the dialogue's own image lower the surprisal of v<LAN>?

G(v) = mean_n mean_{images i without v} [ s(v<LAN> | i, c_n) - s(v<LAN> | own image, c_n) ],
c_n the held-out dialogue cut before v<LAN> (caption removed), the image read as
a prefix of DINOv2 features. Same tables as the text gain (`gain_table`).
Also the matched held-out inputs of either setting, which the attention
analyses (saliency, heads, ablation) read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from emergence.core.io import PipelineError
from emergence.studies.grounding.gain import EvalPairs, gain_table, target_surprisal
from emergence.studies.grounding.saliency import matched_inputs
from emergence.studies.grounding.tokens import encode, lan


def feature_row(image_row: dict[int, int], image: int) -> int:
    """The features row of an image id."""
    if int(image) not in image_row:
        raise PipelineError(f"visual features: no features for image_id {int(image)}")
    return image_row[int(image)]


def image_pairs(
    eval_set: pd.DataFrame, index: dict[str, int], image_row: dict[int, int]
) -> tuple[EvalPairs, np.ndarray]:
    """Image-setting pairs: each held-out dialogue context with its own image (matched), then with
    each of its `other_images`; and the feature row of every pair's image."""
    contexts, targets, rows, matched, feature_rows = [], [], [], [], []
    for row, (context, word, own, others) in enumerate(
        zip(eval_set["image_context"], eval_set["word"], eval_set["image_id"], eval_set["other_images"])
    ):
        ids = encode(context, index)
        for image in [own, *others]:
            feature_rows.append(feature_row(image_row, image))
            contexts.append(ids)
            targets.append(index[lan(word)])
            rows.append(row)
            matched.append(image == own)
    pairs = EvalPairs(contexts, targets, np.array(rows, dtype=np.int64), np.array(matched, dtype=bool))
    return pairs, np.array(feature_rows, dtype=np.int64)


def image_gain_rows(
    model: torch.nn.Module,
    eval_set: pd.DataFrame,
    index: dict[str, int],
    features: torch.Tensor,
    image_row: dict[int, int],
) -> pd.DataFrame:
    """One row per evaluation context: s_matched (own image), s_mismatched (other images), gain."""
    pairs, feature_rows = image_pairs(eval_set, index, image_row)
    prefixes = features[torch.from_numpy(feature_rows)]  # (pairs, P, d)
    return gain_table(eval_set, pairs, target_surprisal(model, pairs.contexts, pairs.targets, prefixes=prefixes))


def matched_visual_inputs(
    setting: str,
    eval_set: pd.DataFrame,
    index: dict[str, int],
    features: torch.Tensor | None = None,
    image_row: dict[int, int] | None = None,
):
    """(contexts, targets, environment token positions, prefixes (N, P, d) or None) of the matched
    held-out dialogs. Caption setting: the text study's, v<ENV> = the caption's target word. Image
    setting: the dialogue without its caption, read after its own image; the P prefix positions are
    the environment (the contexts hold no v<ENV>)."""
    if setting != "image":
        return (*matched_inputs(eval_set, index), None)
    contexts, targets, env_pos = matched_inputs(eval_set, index, column="image_context")
    rows = torch.tensor([feature_row(image_row, image) for image in eval_set["image_id"]], dtype=torch.long)
    return contexts, targets, env_pos, features[rows]  # features[rows]: (N, P, d)
