"""Do the image features tell which target nouns are in an image? A linear probe per noun, against the
majority class, on the features the image setting reads (dino_features' artifact).

Labels: target noun v is in an image when the image's caption names it (v<ENV>); the synthetic scenes'
captions name every object. Images are split 70/30 (seeded); a ridge classifier per noun is fitted on
the training images' standardised features (one penalty for all nouns, picked by 5-fold cross-validation there) and
scored on the test images. Two readouts: the features averaged over the image's positions ("pooled")
and all positions side by side ("positions"). Also printed: the share of the features' spread that
varies across images (the rest is the same for every image; the LM's prefix input standardises it away).

    python bench/visual_probe.py [--params params.yaml] [--layers]

--layers encodes the images again and probes every hidden layer of the encoder (the final layer norm
applied to each, as DINOv2's intermediate-layer readout does) instead of the artifact.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import pandas as pd
import torch

from emergence.core.config import from_dict, path_of, read_params, section
from emergence.core.io import read_parquet
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.dino_features import encoder_layers, load_encoder, load_image
from emergence.studies.grounding.encoder_params import EncoderParams
from emergence.studies.grounding.tokens import env
from emergence.studies.grounding.visdial import find_images

PENALTIES = (0.1, 1.0, 10.0, 100.0, 1000.0)
TRAIN_SHARE, N_FOLDS = 0.7, 5


def labels(dialogs: pd.DataFrame, image_ids: list[int], targets: list[str]) -> np.ndarray:
    """(N_images, n_targets) bool: the image's caption names the target."""
    named = {int(i): set(e) for i, e in zip(dialogs["image_id"], dialogs["env"])}
    return np.array([[env(t) in named[i] for t in targets] for i in image_ids])


def ridge_scores(x_fit: np.ndarray, y_fit: np.ndarray, x_out: np.ndarray, penalty: float) -> np.ndarray:
    """Ridge regression of the 0/1 labels (all nouns at once), in its dual form (images < dimensions)."""
    mean, std = x_fit.mean(0), x_fit.std(0) + 1e-8
    a, b = (x_fit - mean) / std, (x_out - mean) / std
    y_mean = y_fit.mean(0)
    alpha = np.linalg.solve(a @ a.T + penalty * len(a) * np.eye(len(a)), y_fit - y_mean)
    return b @ (a.T @ alpha) + y_mean


def pick_penalty(x: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> float:
    folds = np.array_split(rng.permutation(len(x)), N_FOLDS)

    def cv_accuracy(penalty: float) -> float:
        hits = [
            ((ridge_scores(np.delete(x, f, 0), np.delete(y, f, 0), x[f], penalty) > 0.5) == y[f]).mean() for f in folds
        ]
        return float(np.mean(hits))

    return max(PENALTIES, key=cv_accuracy)


def probe(x: np.ndarray, y: np.ndarray, seed: int = 0) -> pd.DataFrame:
    """Per noun: test accuracy of the majority class and of the probe on pooled and on all positions.
    x: (N_images, P, d) features, y: (N_images, n_targets) labels."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(x))
    fit, test = order[: int(TRAIN_SHARE * len(x))], order[int(TRAIN_SHARE * len(x)) :]
    majority = y[fit].mean(0) >= 0.5
    out = {"present": y.sum(0), "majority": (y[test] == majority).mean(0)}
    for name, flat in (("pooled", x.mean(1)), ("positions", x.reshape(len(x), -1))):
        penalty = pick_penalty(flat[fit], y[fit].astype(float), rng)
        scores = ridge_scores(flat[fit], y[fit].astype(float), flat[test], penalty)
        out[name] = ((scores > 0.5) == y[test]).mean(0)
    return pd.DataFrame(out)


def across_image_share(x: np.ndarray) -> float:
    """Spread across images (per position and dimension) over the total spread of the features."""
    return float(x.std(0).mean() / x.std())


def artifact_features(params: dict) -> tuple[np.ndarray, list[int]]:
    """(features (N, P, d), image id of each row): one row per distinct image (by sha256), since identical
    images on both sides of the split would inflate the probe."""
    feats, _, _ = inputs.features(params)
    images = read_parquet(
        path_of(params, "visual_features") / "images.parquet", {"row": "i", "image_id": "i", "sha256": "O"}
    )
    first = images.sort_values("image_id").drop_duplicates("sha256")
    return feats[torch.tensor(first["row"].tolist())].double().numpy(), first["image_id"].tolist()


def layer_features(params: dict, image_ids: list[int]) -> list[np.ndarray]:
    """Every hidden layer's pooled features of the images: a list over layers of (N_images, P, d)."""
    p = from_dict(EncoderParams, section(params, "dino_features"), "dino_features")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the random-init warning: encoder.json records it for the stage
        encoder = load_encoder(p)
    files = find_images(path_of(params, "visual_images"), image_ids)
    layers: list[list[torch.Tensor]] = []
    for start in range(0, len(files), p.batch_size):
        batch = torch.stack([load_image(f, p.image_size) for f in files[start : start + p.batch_size]])
        hidden = encoder_layers(encoder, batch, p.pool_grid)
        layers = layers or [[] for _ in hidden]
        for acc, h in zip(layers, hidden):
            acc.append(h)
    return [torch.cat(hs).double().numpy() for hs in layers]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--params", default="params.yaml")
    parser.add_argument("--layers", action="store_true", help="probe every encoder layer (encodes again)")
    args = parser.parse_args(argv)
    params = read_params(args.params)
    torch.set_num_threads(int(section(params, "base").get("threads", 2)))
    targets, _ = inputs.vocab_index(params)
    x, image_ids = artifact_features(params)
    y = labels(inputs.dialogs(params), image_ids, targets)
    _, _, record = inputs.features(params)
    print(
        f"{len(image_ids)} images, {len(targets)} target nouns, encoder {record['encoder_id']}"
        + ("" if record.get("pretrained") else " (encoder not pretrained)")
    )
    if args.layers:
        rows = []
        for layer, xl in enumerate(layer_features(params, image_ids)):
            table = probe(xl, y)
            rows.append(
                {
                    "layer": layer,
                    "across_images": across_image_share(xl),
                    **table[["majority", "pooled", "positions"]].mean().to_dict(),
                }
            )
        print(pd.DataFrame(rows).to_string(index=False, float_format="{:.3f}".format))
        return
    table = probe(x, y).astype(float)
    table.index = targets
    table.loc["mean"] = table.mean()
    print(table.to_string(float_format="{:.3f}".format))
    print(f"share of the features' spread across images: {across_image_share(x):.3f}")


if __name__ == "__main__":
    main()
