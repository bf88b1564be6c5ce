"""The grounding study's settings: where the environment comes from, where a run's tables live.

- childes: CHILDES-style transcripts; v<ENV> are words of the action and
  situation tiers (corpus `childes`: paths and params `grounding_*`);
- caption: Visual Dialog dialogs; v<ENV> are the caption's words;
- image: the same dialogs without their caption, read after the image's
  DINOv2 features (a prefix of P positions, the environment).

caption and image share one corpus (`visdial`: paths and params `visual_*`):
its vocabulary and held-out dialogs. Every per-run stage (train, gain,
saliency, heads, ablation) takes `--setting`, the corpus stages (vocab,
eval_set) take `--corpus`, and both read through the classes below, so what
differs between settings is written here once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import torch

from emergence.core.config import path_of, section
from emergence.core.io import PipelineError
from emergence.studies.grounding import inputs, inputs_params, visual_inputs
from emergence.studies.grounding.tokens import MODEL_NAME, read_vocab
from emergence.studies.grounding.visual_gain import matched_visual_inputs

CORPORA = {"childes": "grounding", "visdial": "visual"}  # corpus -> prefix of its paths keys and params sections
SETTINGS = {"childes": "childes", "caption": "visdial", "image": "visdial"}  # setting -> its corpus
SEQ_LEN = {"childes": inputs_params.DEFAULT_SEQ_LEN, "visdial": 96}  # default train.seq_len


@dataclass(frozen=True)
class Corpus:
    """The text a setting's vocabulary, held-out contexts and training sequences come from."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in CORPORA:
            raise PipelineError(f"--corpus: one of {list(CORPORA)}, got {self.name!r}")

    def key(self, what: str) -> str:
        """Its paths key or params section for `what`: grounding_vocab, visual_eval, ..."""
        return f"{CORPORA[self.name]}_{what}"

    @property
    def table_key(self) -> str:
        return "childes_turns" if self.name == "childes" else "visual_dialogs"

    def table(self, params: dict, raw: bool = False) -> pd.DataFrame:
        """One row per transcript turn (childes) or dialog (visdial), its `tokens` under the vocabulary's
        word rule, or as extracted (`raw`, before the vocabulary exists)."""
        if self.name == "childes":
            return inputs.raw_turns(params) if raw else inputs.turns(params)
        return visual_inputs.raw_dialogs(params) if raw else visual_inputs.dialogs(params)

    def vocab_index(self, params: dict) -> tuple[list[str], dict[str, int]]:
        """(target nouns, token -> id)."""
        targets, vocab, _ = read_vocab(path_of(params, self.key("vocab")))
        return targets, {t: i for i, t in enumerate(vocab)}

    def eval_set(self, params: dict) -> pd.DataFrame:
        return inputs.eval_set(params) if self.name == "childes" else visual_inputs.eval_set(params)

    def seq_len(self, params: dict) -> int:
        return int(section(params, self.key("train")).get("seq_len", SEQ_LEN[self.name]))


@dataclass(frozen=True)
class Setting:
    """One setting of the study: its corpus, run names, key columns and environment inputs."""

    name: str

    def __post_init__(self) -> None:
        if self.name not in SETTINGS:
            raise PipelineError(f"--setting: one of {list(SETTINGS)}, got {self.name!r}")

    @property
    def corpus(self) -> Corpus:
        return Corpus(SETTINGS[self.name])

    def key(self, what: str) -> str:
        return self.corpus.key(what)

    def run(self, model: str, seed: int) -> str:
        """A run's name (its folder, its tables' file name). Which runs exist is the matrix's business
        (and `python -m emergence check`'s): reading the run lists here would make every run depend on
        all the others, so adding a seed would retrain them all."""
        if not MODEL_NAME.fullmatch(model):
            raise PipelineError(f"--model: model names are lower-case letters and digits, got {model!r}")
        return f"{model}_seed{seed}" if self.name == "childes" else f"{self.name}_{model}_seed{seed}"

    def keys(self, model: str, seed: int) -> dict[str, str | int]:
        """The leading key columns of its per-run tables (childes tables predate the setting column)."""
        return {**({} if self.name == "childes" else {"setting": self.name}), "model": model, "seed": seed}

    @property
    def key_columns(self) -> dict[str, str]:
        """The key columns' read_parquet kinds."""
        return {**({} if self.name == "childes" else {"setting": "O"}), "model": "O", "seed": "i"}

    def run_file(self, params: dict, what: str, run: str) -> Path:
        """A per-run table, e.g. data/visual/saliency/image_transformer4_seed0.parquet."""
        return path_of(params, self.key(what)) / f"{run}.parquet"

    def checkpoints(self, params: dict, run: str) -> list[tuple[int, Path]]:
        return inputs.run_checkpoints(params, run, CORPORA[self.corpus.name])

    def checkpoint_models(self, params: dict, run: str, desc: str) -> Iterator[tuple[int, torch.nn.Module]]:
        return inputs.checkpoint_models(params, run, desc, CORPORA[self.corpus.name])

    def environment(self, params: dict) -> tuple[torch.Tensor | None, dict[int, int] | None]:
        """What it reads besides tokens: the image setting's (features, image_id -> row); else (None, None)."""
        return visual_inputs.environment(params, self.name)

    def matched_inputs(self, params: dict, index: dict[str, int]):
        """(contexts, targets, environment positions, prefixes or None) of the matched held-out contexts."""
        return matched_visual_inputs(self.name, self.corpus.eval_set(params), index, *self.environment(params))
