"""Study G's token data: target nouns, vocabulary, training windows, evaluation contexts.

Input is the turn table of `childes.extract_turns` (one row per turn, its
`tokens` already ordered: `<MOT>`, situation/event words as `w<ENV>`, speech
as `w<LAN>`). Once the targets are chosen, `mark` applies the word rule
(`env_marking`): by default only target nouns keep their two forms, as in the
paper's example (review, arXiv 2510.13796: "<CHI> takes book<ENV> from mother
<CHI> what's that <MOT> a book<LAN> in it"), every other word is one plain
token shared by both channels. Grounding is measured on *held-out* turns in which a target
noun appears in the environment and is then named: the context is the turn
up to the first `v<LAN>` (the paper's `<CHI> asked for a new book<ENV> <CHI>
i love this` -> `book<LAN>`), and the mismatched contexts swap `v<ENV>` for
another target's `u<ENV>`. Those turns never enter the training windows.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal, get_args

import numpy as np
import pandas as pd
from annotated_types import Ge

from emergence.core.io import PipelineError

ENV, LAN = "<ENV>", "<LAN>"
UNK = "<unk>"
EnvMarking = Literal["targets", "all"]  # grounding_vocab.env_marking: see `mark`
ENV_MARKINGS = get_args(EnvMarking)
ARCHS = ("transformer", "mamba2", "lstm")
MODEL_NAME = re.compile(r"[a-z][a-z0-9]*")  # run names are {model}_seed{S}: no '_' inside the model name


@dataclass
class GroundingRuns:
    models: list[str]  # names of grounding_models entries
    seeds: list[int]
    least_models: ClassVar[int] = 1

    def validate(self, where: str) -> None:
        if len(self.models) < self.least_models or len(set(self.models)) != len(self.models):
            raise PipelineError(
                f"{where}.models: distinct model names, at least {self.least_models}, got {self.models}"
            )
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise PipelineError(f"{where}.seeds: distinct seeds, at least one, got {self.seeds}")

    def names(self) -> list[str]:
        return [run_name(m, s) for m in self.models for s in self.seeds]


@dataclass
class LLCRuns(GroundingRuns):
    """grounding_llc: the runs of grounding_runs that get an LLC curve; none at the default (opt-in,
    profiles/full.yaml)."""

    least_models: ClassVar[int] = 0


def model_entry(models: dict, name: str, where: str = "grounding_models") -> tuple[str, dict]:
    """(arch, config values) of the model called `name` in the grounding_models section."""
    if not MODEL_NAME.fullmatch(name):
        raise PipelineError(f"{where}.{name}: model names are lower-case letters and digits, got {name!r}")
    if name not in models:
        raise PipelineError(f"{where}.{name}: no such model (have {sorted(models)})")
    if not isinstance(models[name], dict):
        raise PipelineError(f"{where}.{name}: must be a mapping (arch: and its config), got {models[name]!r}")
    values = dict(models[name])
    arch = values.pop("arch", None)
    if arch not in ARCHS:
        raise PipelineError(f"{where}.{name}.arch: one of {list(ARCHS)}, got {arch!r}")
    return arch, values


def run_name(model: str, seed: int) -> str:
    return f"{model}_seed{seed}"


def env(word: str) -> str:
    return word + ENV


def lan(word: str) -> str:
    return word + LAN


@dataclass
class VocabParams:
    n_words: Annotated[int, Ge(1)] = 100  # target nouns
    min_count: Annotated[int, Ge(1)] = 100  # each of v<ENV> and v<LAN> at least this often
    min_token_count: Annotated[int, Ge(1)] = 1  # rarer tokens become <unk>
    env_marking: EnvMarking = "targets"  # targets (the paper's example) | all (every env / spoken word marked)


def mark(tokens: Sequence[str], targets: Collection[str], marking: str) -> list[str]:
    """The word rule applied to extracted tokens (every env word w<ENV>, every spoken word w<LAN>).

    targets: only target nouns keep w<ENV> / w<LAN>; any other word becomes the plain token w, one
    token for both channels. The paper shows this in its example (review of arXiv 2510.13796):
    "Entraînement: <CHI> takes book<ENV> from mother <CHI> what's that <MOT> a book<LAN> in it".
    all: every token as extracted (ours: the earlier default, kept as an ablation).
    """
    if marking == "all":
        return list(tokens)
    if marking != "targets":
        raise PipelineError(f"env_marking: one of {list(ENV_MARKINGS)}, got {marking!r}")
    out = []
    for tok in tokens:
        for tag in (ENV, LAN):
            if tok.endswith(tag) and tok[: -len(tag)] not in targets:
                tok = tok[: -len(tag)]
        out.append(tok)
    return out


def marked_table(table: pd.DataFrame, targets: Collection[str], marking: str) -> pd.DataFrame:
    """A copy of a turn / dialog table with `mark` applied to its tokens."""
    wanted = frozenset(targets)
    return table.assign(tokens=[mark(tokens, wanted, marking) for tokens in table["tokens"]])


def token_counts(token_lists: Iterable[Sequence[str]]) -> Counter:
    counts: Counter = Counter()
    for tokens in token_lists:
        counts.update(tokens)
    return counts


def select_targets(
    counts: Counter, candidates: Sequence[str], n_words: int, min_count: int, where: str = "grounding_vocab"
) -> list[str]:
    """The n_words candidate nouns whose rarer form is most frequent, each form >= min_count."""
    words = list(dict.fromkeys(candidates))
    passing = [(min(counts[env(w)], counts[lan(w)]), w) for w in words]
    passing = [(c, w) for c, w in passing if c >= min_count]
    if len(passing) < n_words:
        raise PipelineError(
            f"{where}.n_words: only {len(passing)} of the {len(words)} candidate nouns have both forms >= "
            f"min_count={min_count} times, {n_words} requested (lower n_words or min_count)"
        )
    return [w for _, w in sorted(passing, key=lambda cw: (-cw[0], cw[1]))[:n_words]]


def build_vocab(counts: Counter, targets: Sequence[str], min_token_count: int) -> list[str]:
    """<unk> first, then every token seen >= min_token_count times (targets' forms always),
    by frequency then spelling: deterministic ids."""
    keep = {t for t, c in counts.items() if c >= min_token_count} | {f(w) for w in targets for f in (env, lan)}
    return [UNK] + sorted(keep, key=lambda t: (-counts[t], t))


def evaluation_turns(
    turns: pd.DataFrame, targets: Sequence[str], max_per_word: int, seed: int, max_len: int | None = None
) -> pd.DataFrame:
    """Held-out contexts: turns where v<ENV> precedes the turn's first v<LAN>.

    Columns: turn (row index in `turns`), word, context (tokens before that v<LAN>).
    At most max_per_word per word, drawn with `seed`; contexts longer than
    max_len (the models' context) are not eligible.
    """
    rows = []
    wanted = set(targets)
    for i, tokens in zip(turns.index, turns["tokens"]):
        seen_env = set()
        for pos, tok in enumerate(tokens):
            if tok.endswith(ENV):
                seen_env.add(tok[: -len(ENV)])
            elif tok.endswith(LAN) and tok[: -len(LAN)] in wanted and tok[: -len(LAN)] in seen_env:
                if max_len is None or pos <= max_len:
                    rows.append({"turn": int(i), "word": tok[: -len(LAN)], "context": list(tokens[:pos])})
                break  # one context per turn: the turn is held out once
    table = pd.DataFrame(rows, columns=["turn", "word", "context"])
    rng = np.random.default_rng(seed)
    picked = [g.iloc[np.sort(rng.permutation(len(g))[:max_per_word])] for _, g in table.groupby("word", sort=True)]
    return pd.concat(picked, ignore_index=True) if picked else table


@dataclass
class EvalParams:
    max_per_word: Annotated[int, Ge(1)] = 10  # contexts per target noun
    n_mismatched: Annotated[int, Ge(1)] = 10  # other targets u per context
    seed: int = 0


def target_vocabulary(
    turns: pd.DataFrame, candidates: Sequence[str], p: VocabParams, where: str
) -> tuple[list[str], list[str], pd.DataFrame]:
    """(targets, vocab, candidates) of an extracted table's `tokens`: the vocab is that of the tokens
    after the word rule (p.env_marking); candidates has a row per candidate noun, in list order:
    word, n_env, n_lan (occurrences of each form), passes (both >= p.min_count), target (chosen)."""
    counts = token_counts(turns["tokens"])  # a target's two forms count the same under either rule
    targets = select_targets(counts, candidates, p.n_words, p.min_count, where)
    words = list(dict.fromkeys(candidates))
    stats = pd.DataFrame(
        {
            "word": words,
            "n_env": np.array([counts[env(w)] for w in words], dtype=np.int64),
            "n_lan": np.array([counts[lan(w)] for w in words], dtype=np.int64),
        }
    )
    stats["passes"] = np.minimum(stats["n_env"], stats["n_lan"]) >= p.min_count
    stats["target"] = stats["word"].isin(targets)
    marked = token_counts(marked_table(turns, targets, p.env_marking)["tokens"])
    return targets, build_vocab(marked, targets, p.min_token_count), stats


def evaluation_set(
    turns: pd.DataFrame,
    targets: Sequence[str],
    p: EvalParams,
    where: str,
    source: str,
    max_len: tuple[int, str] | None = None,
) -> pd.DataFrame:
    """Held-out contexts (evaluation_turns) of every target, each with n_mismatched other targets;
    `max_len`: (the longest context, the params key it comes from)."""
    if p.n_mismatched > len(targets) - 1:
        raise PipelineError(
            f"{where}.n_mismatched: at most {len(targets) - 1} other targets exist, got {p.n_mismatched}"
        )
    length, key = max_len or (None, "")
    table = evaluation_turns(turns, targets, p.max_per_word, p.seed, length)
    if missing := sorted(set(targets) - set(table["word"])):
        lack = f"no held-out context for target '{missing[0]}' ({len(missing)} targets lack one)"
        if length is not None and not set(missing) - set(evaluation_turns(turns, missing, 1, p.seed)["word"]):
            raise PipelineError(f"{key}: {length}, and {lack} that short: raise it")  # longer ones exist
        raise PipelineError(f"{source}: {lack}")
    rng = np.random.default_rng(p.seed)
    table["others"] = [
        sorted(rng.choice([u for u in targets if u != w], p.n_mismatched, replace=False).tolist())
        for w in table["word"]
    ]
    return table


def mismatched(context: Sequence[str], word: str, other: str) -> list[str]:
    """The context with every v<ENV> replaced by u<ENV>."""
    return [env(other) if tok == env(word) else tok for tok in context]


def encode(tokens: Sequence[str], index: dict[str, int]) -> list[int]:
    return [index.get(t, 0) for t in tokens]  # 0 = <unk>


def training_windows(
    turns: pd.DataFrame, held_out: set[int], index: dict[str, int], seq_len: int, key: str
) -> np.ndarray:
    """(N, seq_len + 1) int32 windows cut from each file's token stream, held-out turns removed; `key`:
    the params key seq_len comes from (grounding_train.seq_len), named when no file holds one window."""
    windows, longest = [], 0
    for _, group in turns.groupby("file", sort=True):
        stream = [t for i, toks in zip(group.index, group["tokens"]) if i not in held_out for t in toks]
        ids = np.asarray(encode(stream, index), dtype=np.int32)
        n, longest = len(ids) // (seq_len + 1), max(longest, len(ids))
        if n:
            windows.append(ids[: n * (seq_len + 1)].reshape(n, seq_len + 1))
    if not windows:
        raise PipelineError(
            f"{key}: {seq_len}, but no file has the {seq_len + 1} tokens of one training window (the longest, "
            f"held-out turns removed, has {longest}): lower it"
        )
    return np.concatenate(windows)


def read_vocab(path: str | Path) -> tuple[list[str], list[str], str]:
    """(targets, vocab, env_marking) from grounding_vocab's JSON; PipelineError naming the file if unusable."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
        targets, vocab, marking = list(data["targets"]), list(data["vocab"]), data["env_marking"]
    except FileNotFoundError as e:
        raise PipelineError(f"{path}: not found (run grounding_vocab first)") from e
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
        raise PipelineError(f"{path}: not a grounding vocabulary file ({e.__class__.__name__}: {e})") from e
    if marking not in ENV_MARKINGS:
        raise PipelineError(f"{path}: env_marking must be one of {list(ENV_MARKINGS)}, got {marking!r}")
    return targets, vocab, marking
