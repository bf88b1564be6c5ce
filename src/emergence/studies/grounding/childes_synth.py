"""Synthetic CHILDES: CHAT transcripts of simulated caregiver-child toy play.

The embedded default of study G. A session keeps a set of objects present:
an object enters with a %sit tier ("MOT brings out a ball"), people act on
present objects on %act tiers ("gives ball to CHI", sometimes scoped
<bef>/<aft>), and one leaves when it is put away. Speech mentions a present
object with probability p_mention_present, an absent one with
p_mention_absent, and otherwise is small talk, in varied frames sprinkled
with CHAT codes ([+ IMP], [/], xxx, &=laughs, &-uh) so the real extractor
meets the same mess as in CHILDES. Compounds are written teddy_bear on the
main tier and teddy+bear on %act/%sit, as real transcripts mix both.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from annotated_types import Ge, Le

from emergence.core.io import PipelineError, atomic_path
from emergence.core.rules import field_problems

P_ENTER = 0.12  # an object enters this turn (always when none is present)
P_LEAVE = 0.2  # an action is putting its object away
MAX_PRESENT = 5  # a toddler's play space holds a handful of things at once
P_CODE = 0.15  # an utterance carries a CHAT code
MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")

ENTER = (
    "MOT brings out {a} {n}",
    "{a} {n} is on the floor",
    "CHI finds {a} {n} in the toy box",
    "MOT takes {a} {n} out of the bag",
    "{a} {n} is on the table",
)
ACTS = (
    "gives {n} to {other}",
    "picks up {n}",
    "holds up {n}",
    "points at {n}",
    "drops {n}",
    "shows {n} to {other}",
    "pushes {n}",
    "puts {n} in the box",
    "looks at {n}",
)
LEAVE = ("puts {n} away", "throws {n} behind the couch", "gives {n} back to {other}")
MENTION = {
    "MOT": (
        "do you want the {n} ?",
        "where is the {n} ?",
        "that's a nice {n} .",
        "is that your {n} ?",
        "what color is the {n} ?",
        "here's the {n} .",
        "where did the {n} go ?",
        "you like the {n} ?",
        "{a} {n} !",
        "see the {n} ?",
    ),
    "CHI": ("{n} !", "{n} .", "more {n} .", "my {n} .", "want {n} .", "there {n} !", "{n} ?", "no {n} .", "big {n} !"),
}
IMPERATIVE = ("look at the {n} .", "give me the {n} .", "put the {n} down .", "find the {n} .")
SMALL_TALK = {
    "MOT": (
        "yes .",
        "okay .",
        "what's that ?",
        "mhm .",
        "good girl .",
        "are you hungry ?",
        "let's play .",
        "what do you want ?",
        "oh my !",
        "that's right .",
        "careful .",
        "what are you doing ?",
    ),
    "CHI": ("yes .", "no .", "mommy !", "uh oh .", "what that ?", "more .", "down .", "hi .", "all gone .", "0 ."),
}


@dataclass(frozen=True)
class SynthConfig:
    n_files: Annotated[int, Ge(1)] = 4
    turns_per_file: Annotated[int, Ge(1)] = 400
    n_nouns: Annotated[int, Ge(1)] = 40  # drawn from the noun list (paths.grounding_nouns)
    p_mention_present: Annotated[float, Ge(0), Le(1)] = 0.6  # speech names an object that is in the situation
    p_mention_absent: Annotated[float, Ge(0), Le(1)] = 0.1  # speech names an object that is not
    p_act: Annotated[float, Ge(0), Le(1)] = 0.3  # a turn carries an %act tier
    p_scoped: Annotated[float, Ge(0), Le(1)] = 0.2  # an %act happens <bef> or <aft> the utterance
    seed: int = 0

    def validate(self, where: str = "childes_synth") -> None:
        """The declared bounds too (write_sessions takes a config built in code), then the rule a bound cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))
        if self.p_mention_present + self.p_mention_absent > 1.0:
            raise PipelineError(
                f"{where}.p_mention_absent: p_mention_present + p_mention_absent must be"
                f" <= 1, got {self.p_mention_present + self.p_mention_absent}"
            )


def _header(cfg: SynthConfig, i: int) -> list[str]:
    months = 18 + i % 18  # ages 1;06 .. 2;11, a new session every month
    return [
        "@UTF8",
        "@Begin",
        "@Languages:\teng",
        "@Participants:\tCHI Target_Child, MOT Mother",
        f"@ID:\teng|synth|CHI|{months // 12};{months % 12:02d}.00|female|||Target_Child|||",
        "@ID:\teng|synth|MOT||female|||Mother|||",
        f"@Date:\t{1 + i % 28:02d}-{MONTHS[i % 12]}-{2000 + i // 12}",
        "@Situation:\ttoy play on the living room floor",
        f"@Comment:\tsynthetic session {i + 1} of {cfg.n_files}, childes_synth seed {cfg.seed}",
    ]


def _fill(frame: str, noun: str, other: str = "", dependent: bool = False) -> str:
    """A frame with its noun; dependent tiers write compounds with + (teddy+bear)."""
    a = "an" if noun[0] in "aeiou" else "a"
    return frame.format(n=noun.replace("_", "+") if dependent else noun, a=a, other=other)


def _sprinkle(r: random.Random, speaker: str, utterance: str) -> str:
    """Add one CHAT code the extractor must strip: a retracing, xxx, an event or a filler."""
    words = utterance.split(" ")
    if words[0] == "0" or r.random() >= P_CODE:
        return utterance
    code = r.choice(("[/]", "xxx" if speaker == "CHI" else "&-uh", "&=laughs"))
    if code == "[/]":  # "the [/] the ball": the speaker restarts
        words[:1] = [words[0], code, words[0]]
    else:
        words.insert(0, code)
    return " ".join(words)


def _speech(cfg: SynthConfig, r: random.Random, speaker: str, present: list[str], inventory: tuple[str, ...]) -> str:
    draw = r.random()
    if draw < cfg.p_mention_present:
        noun = r.choice(present)
    elif draw < cfg.p_mention_present + cfg.p_mention_absent and len(present) < len(inventory):
        noun = r.choice([n for n in inventory if n not in present])
    else:
        return _sprinkle(r, speaker, r.choice(SMALL_TALK[speaker]))
    if speaker == "MOT" and r.random() < 0.25:  # imperatives carry the [+ IMP] postcode after the terminator
        return _sprinkle(r, speaker, _fill(r.choice(IMPERATIVE), noun)) + " [+ IMP]"
    return _sprinkle(r, speaker, _fill(r.choice(MENTION[speaker]), noun))


def _session(cfg: SynthConfig, r: random.Random, inventory: tuple[str, ...], i: int) -> str:
    lines = _header(cfg, i)
    present: list[str] = []
    for _ in range(cfg.turns_per_file):
        speaker = "MOT" if r.random() < 0.6 else "CHI"
        other = "CHI" if speaker == "MOT" else "MOT"
        dependents = []
        if not present or (r.random() < P_ENTER and len(present) < min(MAX_PRESENT, len(inventory))):
            noun = r.choice([n for n in inventory if n not in present])
            present.append(noun)
            dependents.append("%sit:\t" + _fill(r.choice(ENTER), noun, dependent=True))
        leaving = None
        if r.random() < cfg.p_act:
            noun = r.choice(present)
            leaving = noun if r.random() < P_LEAVE else None
            act = _fill(r.choice(LEAVE if leaving else ACTS), noun, other, dependent=True)
            scope = r.choice(("<bef> ", "<aft> ")) if r.random() < cfg.p_scoped else ""
            dependents.append(f"%act:\t{scope}{act}")
        lines.append(f"*{speaker}:\t" + _speech(cfg, r, speaker, present, inventory))
        lines += dependents
        if leaving:
            present.remove(leaving)
    return "\n".join(lines + ["@End"]) + "\n"


def noun_inventory(cfg: SynthConfig, noun_list: Sequence[str], where: str = "childes_synth") -> tuple[str, ...]:
    """The cfg.n_nouns objects the sessions play with, drawn from `noun_list` by cfg.seed."""
    cfg.validate(where)
    if cfg.n_nouns > len(noun_list):
        raise PipelineError(f"{where}.n_nouns: the noun list has {len(noun_list)} nouns, got {cfg.n_nouns}")
    return tuple(random.Random(f"nouns-{cfg.seed}").sample(tuple(noun_list), cfg.n_nouns))


def write_sessions(cfg: SynthConfig, noun_list: Sequence[str], out_dir: str | Path) -> list[Path]:
    """Write cfg.n_files CHAT sessions into out_dir (replaced atomically); same cfg, same bytes."""
    inventory = noun_inventory(cfg, noun_list)
    r = random.Random(cfg.seed)
    names = [f"session{i + 1:03d}.cha" for i in range(cfg.n_files)]
    with atomic_path(out_dir) as tmp:
        tmp.mkdir()
        for i, name in enumerate(names):
            (tmp / name).write_bytes(_session(cfg, r, inventory, i).encode("utf-8"))
    return [Path(out_dir) / name for name in names]
