"""Template contexts: grounding measured on controlled carriers, against every mismatch.

The paper (review of arXiv 2510.13796) tests on template contexts, "Test: <CHI> asked for a new
book<ENV> <CHI> I love this [prédiction: book<LAN>]", and defines

    G(v) = 1/N sum_n 1/M sum_{u != v} [ s(v<LAN> | c_n(u<ENV>)) - s(v<LAN> | c_n(v<ENV>)) ]

with s = -log p, c_n the n-th template and u every other target word. The context c_n(u<ENV>) does not
depend on v, so one forward pass of it gives s(v<LAN> | c_n(u<ENV>)) for every v at once: templates x
targets sequences per checkpoint, not templates x targets^2.

Ours: one speaker tag per context, as in our turns ("<CHI> asked for a new book<ENV> i love this"); the
paper's example repeats it before the speech.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from emergence.core.io import PipelineError
from emergence.studies.grounding.nouns import read_tsv
from emergence.studies.grounding.tokens import ENV, LAN, env, lan, mark

COLUMNS = ("id", "speaker", "env", "speech", "source")
SLOT = "{n}"
SPEAKER = re.compile(r"[A-Z]{3}")


@dataclass(frozen=True)
class Template:
    id: str
    speaker: str  # CHAT participant code: the context's first token is <speaker>
    env: str  # environment frame, words around one {n}
    speech: str  # speech frame, read right before the predicted v<LAN>
    source: str

    def tokens(self, noun: str, targets: Sequence[str], marking: str) -> list[str]:
        """<speaker>, the env frame with noun<ENV> in the slot, the speech frame, under the word rule."""
        env_words = [env(noun) if w == SLOT else w.lower() + ENV for w in self.env.split()]
        speech = [w.lower() + LAN for w in self.speech.split()]  # extracted words are lower-cased
        return mark([f"<{self.speaker}>", *env_words, *speech], targets, marking)


def read_templates(path: str | Path) -> list[Template]:
    """The templates of a tab-separated file (COLUMNS header, '#' comment lines); PipelineError naming
    file and line for anything malformed."""
    templates, seen = [], set()
    for n, fields in read_tsv(path, COLUMNS, "template"):
        t = Template(*fields)
        if t.id in seen:
            raise PipelineError(f"{path}:{n}: duplicate template id {t.id!r}")
        if not SPEAKER.fullmatch(t.speaker):
            raise PipelineError(f"{path}:{n}: speaker must be a CHAT code such as MOT or CHI, got {t.speaker!r}")
        if t.env.split().count(SLOT) != 1 or t.env.count(SLOT) != 1:
            raise PipelineError(f"{path}:{n}: the env frame needs exactly one {SLOT} as a word, got {t.env!r}")
        if any(w.endswith((ENV, LAN)) or "{" in w for w in (t.env.replace(SLOT, "") + " " + t.speech).split()):
            raise PipelineError(f"{path}:{n}: frames hold plain words (no <ENV>/<LAN>, one {SLOT})")
        seen.add(t.id)
        templates.append(t)
    return templates


def template_contexts(
    templates: Sequence[Template], targets: Sequence[str], marking: str, training: Sequence[Sequence[str]]
) -> pd.DataFrame:
    """One row per (template, target u in its slot): template, word (u), context tokens.

    Refuses a template whose carrier words include a target noun (the context would hold a second
    target), and one whose context occurs in the training token lists (it would not be held out)."""
    wanted = set(targets)
    rows = []
    for t in templates:
        if carrier := sorted(wanted & set(t.env.lower().split() + t.speech.lower().split())):
            raise PipelineError(f"template {t.id}: carrier word {carrier[0]!r} is a target noun")
        rows += [{"template": t.id, "word": u, "context": t.tokens(u, targets, marking)} for u in targets]
    table = pd.DataFrame(rows, columns=["template", "word", "context"])
    stream = "".join(" ".join(tokens) + " \n" for tokens in training)  # every token ends in a space
    for template, word, context in table.itertuples(index=False):
        if " ".join(context) + " " in stream:  # whole tokens: "see the" does not match "see theatre"
            raise PipelineError(f"template {template}: its context with {word!r} occurs in the training turns")
    return table


def template_surprisals(
    log_probs: np.ndarray, contexts: pd.DataFrame, targets: Sequence[str], index: dict
) -> np.ndarray:
    """(T, K, K) s[t, u, v] = -log p(v<LAN> | template t with u<ENV>), from the log-probabilities (N, V)
    after each row of `contexts` (rows ordered template-major, then u in `targets` order)."""
    k = len(targets)
    words = contexts["word"].to_numpy()
    if len(contexts) % k or not (words.reshape(-1, k) == np.asarray(targets)).all():
        raise PipelineError("template contexts: rows must run over every target, in vocabulary order")
    lan_ids = [index[lan(v)] for v in targets]
    return -log_probs[:, lan_ids].reshape(len(contexts) // k, k, k)


def template_gain_table(s: np.ndarray, template_ids: Sequence[str], targets: Sequence[str]) -> pd.DataFrame:
    """One row per (template, v): s_matched = s[t, v, v], s_mismatched = the mean of s[t, u, v] over
    every u != v, gain = s_mismatched - s_matched."""
    n_t, k, _ = s.shape
    matched = np.einsum("tvv->tv", s)  # (T, K)
    mismatched = (s.sum(axis=1) - matched) / (k - 1)  # (T, K): column v summed over u, minus u = v
    return pd.DataFrame(
        {
            "template": np.repeat(list(template_ids), k),
            "word": np.tile(list(targets), n_t),
            "s_matched": matched.ravel(),
            "s_mismatched": mismatched.ravel(),
            "gain": (mismatched - matched).ravel(),
        }
    )
