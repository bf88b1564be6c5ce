"""The word-rule ablation (grounding_marking): one run trained with every word marked, read beside the default.

The paper splits only the target nouns into two tokens (its example: "<CHI> takes book<ENV> from mother
<CHI> what's that <MOT> a book<LAN> in it"); `env_marking: all` marks every word of an environment tier
w<ENV> and every spoken word w<LAN>, which doubles the vocabulary. This ablation trains one model and
seed under `all` with the same targets, held-out turns, templates and training settings, so the report
can show how much of G the word rule carries.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
import torch

from emergence.core.io import PipelineError
from emergence.studies.grounding.gain import gain_rows, last_log_probs, word_gains
from emergence.studies.grounding.templates import (
    Template,
    template_contexts,
    template_gain_table,
    template_surprisals,
)
from emergence.studies.grounding.tokens import build_vocab, encode, marked_table, token_counts

RULE = "all"  # the ablated word rule; the default is the vocabulary's own (targets)


def all_marked_inputs(
    raw: pd.DataFrame, targets: Sequence[str], eval_set: pd.DataFrame, min_token_count: int
) -> tuple[pd.DataFrame, list[str], pd.DataFrame]:
    """(turns, vocab, eval set) under env_marking all, for the same targets and held-out turns. The
    marking maps token to token, so each held-out context is the same prefix of the same turn."""
    table = marked_table(raw, targets, RULE)
    vocab = build_vocab(token_counts(table["tokens"]), targets, min_token_count)
    contexts = [list(table.at[turn, "tokens"][: len(c)]) for turn, c in zip(eval_set["turn"], eval_set["context"])]
    return table, vocab, eval_set.assign(context=contexts)


def final_word_gains(
    model: torch.nn.Module,
    eval_set: pd.DataFrame,
    templates: Sequence[Template],
    training: Sequence[Sequence[str]],
    targets: Sequence[str],
    index: dict[str, int],
) -> pd.DataFrame:
    """G(v) of a model under the ablated rule, one row per (measure, word): natural (held-out turns)
    and template (every template and every mismatch u != v)."""
    natural = word_gains(gain_rows(model, eval_set, index), keys=())
    contexts = template_contexts(templates, targets, RULE, training)
    log_probs = last_log_probs(model, [encode(c, index) for c in contexts["context"]])
    s = template_surprisals(log_probs, contexts, targets, index)
    template = template_gain_table(s, [t.id for t in templates], targets)
    template = template.groupby("word", as_index=False)[["s_matched", "s_mismatched", "gain"]].mean()
    return pd.concat([natural.assign(measure="natural"), template.assign(measure="template")], ignore_index=True)[
        ["measure", "word", "s_matched", "s_mismatched", "gain"]
    ]


def rule_table(default: pd.DataFrame, ablation: pd.DataFrame) -> pd.DataFrame:
    """Mean G over words per (rule, measure): `default` and `ablation` hold measure, word, gain at the
    last checkpoint of the same model and seed."""
    both = pd.concat([default.assign(rule="targets (default)"), ablation.assign(rule="all (ablation)")])
    return both.groupby(["measure", "rule"], sort=False)["gain"].agg(G="mean", n_words="size").reset_index()


def default_word_gains(natural: pd.DataFrame, template: pd.DataFrame, model: str, seed: int) -> pd.DataFrame:
    """G(v) of the default run of this model and seed at its last checkpoint, as final_word_gains gives
    it: natural from the per-context gain rows, template from the per-template rows."""

    def last(rows: pd.DataFrame, measure: str) -> pd.DataFrame:
        run = rows[(rows["model"] == model) & (rows["seed"] == seed)]
        if run.empty:
            raise PipelineError(f"grounding_marking: no default run {model} seed {seed} to compare with")
        run = run[run["step"] == run["step"].max()]
        return word_gains(run, keys=()).assign(measure=measure)

    return pd.concat([last(natural, "natural"), last(template, "template")], ignore_index=True)
