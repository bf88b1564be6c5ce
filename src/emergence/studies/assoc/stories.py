"""The embedded default corpus: TinyStories-style children's stories.

A story is a plot frame (finding, losing, sharing, a hungry animal, a rainy
day, being brave) rendered step by step: each step picks one of a few sentence
templates, and the slots (hero, friend, animal, object, place, feelings...) are
bound once per story, so the same characters and objects recur across its
sentences. That recurrence, plus frame-specific word order, gives the corpus
non-trivial bigram and within-document co-occurrence statistics. Slot fillers
and template alternatives are Zipf-weighted: ~180 word types, of which the 128
most frequent cover ~95% of the tokens. Same seed -> same stories -> same bytes.

Two knobs widen it to a real corpus's shape where a profile needs one (the paper's |V| = 3000 and
201-token sequences in profiles/paper_smoke.yaml): `frames` plot frames per story (each with its own
cast, so a story is about `frames` times longer), and `lexicon` invented names (CV syllables, e.g.
"Bazo"), where story i's hero is name i mod `lexicon` in each of its frames, so every invented name is
one more type, as TinyStories' long tail of names and rare words would be.
"""

from __future__ import annotations

import itertools
import os
import random
import re
from dataclasses import dataclass
from typing import Annotated

from annotated_types import Ge, Le

from emergence.core.io import PipelineError, atomic_path
from emergence.core.rules import field_problems

DOC_SEPARATOR = "<|endoftext|>"

GIRLS = ("Lily", "Mia", "Sue", "Anna", "Lucy", "Emma")
BOYS = ("Tom", "Ben", "Max", "Sam", "Tim", "Jack")
ANIMALS = ("dog", "cat", "bird", "bunny", "frog", "duck", "bear")
OBJECTS = ("ball", "kite", "doll", "book", "hat", "toy car", "teddy bear", "box", "boat")
FOODS = ("apple", "cookie", "cake", "carrot", "bread")
PLACES = ("park", "garden", "forest", "beach", "pond", "hill")
COLOURS = ("red", "blue", "big", "little", "green", "pink", "yellow")
GOOD = ("happy", "glad", "proud")
BAD = ("sad", "scared", "upset")
PARENTS = ("mom", "dad", "grandma")
FEARS = ("the dark", "the big dog", "the water", "the tall tree")

# A frame is a sequence of steps; a step is a tuple of alternative templates,
# the first the most likely ("" = the step may be skipped).
OPENINGS = (
    "Once upon a time, there was a little {kid} named {Hero}.",
    "One day, {Hero} went to play in the {place}.",
    "{Hero} was a little {kid} who liked to play.",
)
FRAMES = {
    "found": (
        OPENINGS,
        ("{He} liked to play in the {place}.", ""),
        ("One day, {he} went to the {place} with {his} {parent}.", "One day, {he} went to the {place}."),
        ("There, {he} found {a_colour_obj}.", "Near a tree, {he} saw {a_colour_obj}."),
        ("{He} was very {good}!", '"Look, {parent}! I found {a_obj}!" {he} said.'),
        ("{He} showed the {obj} to {his} friend {Friend}.", "{Friend} came to see the {obj}."),
        ('"Can I play with it too?" asked {Friend}.', '"It is so {colour}!" said {Friend}.', ""),
        ("They played with the {obj} all day.", "They played and had fun."),
    ),
    "lost": (
        OPENINGS,
        ("{Hero} had {a_colour_obj}.", "{Hero} had a toy. It was {a_colour_obj}."),
        ("{He} loved {his} {obj} very much.", "{He} took it to the {place} every day."),
        ("One day, {he} could not find {his} {obj}.", "One day, {he} lost {his} {obj} in the {place}."),
        ("{He} was very {bad} and started to cry.", '{Hero} was {bad}. "Where is my {obj}?" {he} asked.'),
        ("{His} friend {Friend} came to help.", '{His} {parent} said, "Let us look for it."'),
        ("They looked and looked.", "They looked in the {place2} and under the bed."),
        ("At last, they found the {obj}!", "Then, {he} saw the {obj} next to {a_animal}."),
        ("{Hero} was {good} again.", '{Hero} said, "Thank you!"'),
    ),
    "share": (
        OPENINGS,
        ("{Hero} had a friend named {Friend}.", "{Hero} and {Friend} were friends."),
        (
            "One day, they both wanted to play with the {colour} {obj}.",
            "They found {a_obj} in the {place}, and both wanted it.",
        ),
        ('"It is mine!" said {Hero}.', '"No, it is mine!" said {Friend}.'),
        ("{Friend} was {bad}.", "They were both {bad}."),
        ('{His} {parent} came and said, "You can share the {obj}."', "Then {Hero} had an idea."),
        ('"You can play with it first," {he} said.', '"Let us play with it together," said {Hero}.'),
        ("They played with the {obj} in the {place}.", "They took turns with the {obj}."),
        ("They were {good} to share.", ""),
    ),
    "animal": (
        OPENINGS,
        ("One day, {Hero} went to the {place}.", "{Hero} went to the {place} with {his} {parent}."),
        ("There, {he} saw {a_colour_animal}.", "{He} saw {a_animal} near the {place2}."),
        ("The {animal} was {bad} and hungry.", "The {animal} was all alone."),
        ('"Are you hungry, little {animal}?" asked {Hero}.', "{Hero} wanted to help the {animal}."),
        ("{He} gave the {animal} {a_food}.", "{He} gave {his} {food} to the {animal}."),
        ("The {animal} ate the {food} and was {good}.", "The {animal} liked the {food} very much."),
        ("From that day on, {Hero} and the {animal} were friends.", "Every day, the {animal} came to play."),
    ),
    "rain": (
        OPENINGS,
        ("{Hero} wanted to go to the {place} with {Friend}.", "{He} wanted to play in the {place}."),
        ("But then, it started to rain.", "But the rain came down."),
        ("{Hero} was {bad}.", '"Now we can not play," {he} said.'),
        ('{His} {parent} said, "You can play in the house."', "Then {Friend} came with {a_obj}."),
        ("They played with the {obj} in the house.", "They played with a box in the house."),
        ("Soon, the rain stopped and the sun came out.", "Then the sun came out."),
        ("They went to the {place} and played all day.", "They went out and saw a rainbow!"),
        ("{Hero} was {good}.", ""),
    ),
    "brave": (
        OPENINGS,
        ("{Hero} was scared of {fear}.", "{Hero} did not like {fear}. It made {him} {bad}."),
        ('One day, {his} friend {Friend} said, "Do not be scared."', '{His} {parent} said, "You can do it."'),
        ("{Hero} wanted to try.", "{Hero} took {his} {colour} {obj} and tried."),
        ("It was not so bad!", "{He} did it, and it was fun!"),
        ("{Hero} was {good}.", '"I did it!" {he} said.'),
    ),
}
ENDINGS = ("The end.", "", "They were happy.", "That night, {he} went to sleep with a smile.")


_TEMPLATE_TEXT = (
    *GIRLS, *BOYS, *ANIMALS, *OBJECTS, *FOODS, *PLACES, *COLOURS, *GOOD, *BAD, *PARENTS, *FEARS, *ENDINGS,
    *(t for steps in FRAMES.values() for alternatives in steps for t in alternatives),
)  # fmt: skip


SYLLABLES = tuple(c + v for c in "bdfgklmnprstvz" for v in "aeiou")  # 70
MAX_LEXICON = len(SYLLABLES) ** 3  # there are fewer than 70**2 + 70**3 names once the templates' words are skipped


def invented_names(n: int) -> list[str]:
    """The first n invented names: two CV syllables, then three ("Baba", "Babe", ...), skipping any
    that spells a word of the templates ("like", "time"), so each is a type of its own."""
    words = {w.lower() for text in _TEMPLATE_TEXT for w in re.findall(r"[A-Za-z]+", text)}
    spelled = ("".join(t) for k in (2, 3) for t in itertools.product(SYLLABLES, repeat=k))
    return list(itertools.islice((w.capitalize() for w in spelled if w not in words), n))


@dataclass(frozen=True)
class StoryConfig:
    n_stories: Annotated[int, Ge(1)] = 3000
    seed: int = 0
    frames: Annotated[int, Ge(1)] = 1  # plot frames told one after another in each story
    lexicon: Annotated[int, Ge(0), Le(MAX_LEXICON)] = 0  # invented hero names (0: the natural names only)

    def validate(self, where: str = "stories") -> None:
        """The bounds declared above: generate_stories checks a config built in code here."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))


def _a(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _pick(r: random.Random, options: tuple[str, ...]) -> str:
    """Zipf-weighted choice (weight 1/rank), so word frequencies have a head and a tail."""
    return r.choices(options, weights=[1 / (i + 1) for i in range(len(options))])[0]


def _cast(r: random.Random, name: str | None) -> dict[str, str]:
    """The slots of one frame: who (the hero is `name` if given), what, where and how they feel."""
    girl = r.random() < 0.5
    hero = name or _pick(r, GIRLS if girl else BOYS)
    friend = _pick(r, tuple(n for n in GIRLS + BOYS if n != hero))
    place = _pick(r, PLACES)
    place2 = _pick(r, tuple(p for p in PLACES if p != place))
    obj, animal, food, colour = _pick(r, OBJECTS), _pick(r, ANIMALS), _pick(r, FOODS), _pick(r, COLOURS)
    he, his, him = ("she", "her", "her") if girl else ("he", "his", "him")
    return {
        "Hero": hero,
        "Friend": friend,
        "kid": "girl" if girl else "boy",
        "he": he,
        "his": his,
        "him": him,
        "He": he.capitalize(),
        "His": his.capitalize(),
        "place": place,
        "place2": place2,
        "obj": obj,
        "animal": animal,
        "food": food,
        "colour": colour,
        "good": _pick(r, GOOD),
        "bad": _pick(r, BAD),
        "parent": _pick(r, PARENTS),
        "fear": _pick(r, FEARS),
        "a_obj": _a(obj),
        "a_animal": _a(animal),
        "a_food": _a(food),
        "a_colour_obj": _a(f"{colour} {obj}"),
        "a_colour_animal": _a(f"{colour} {animal}"),
    }


def _frame(r: random.Random, name: str | None) -> str:
    slots = _cast(r, name)
    steps = (*r.choice(list(FRAMES.values())), ENDINGS)
    sentences = (_pick(r, alternatives).format(**slots) for alternatives in steps)
    return " ".join(s for s in sentences if s)


def generate_stories(cfg: StoryConfig) -> list[str]:
    cfg.validate()
    r = random.Random(cfg.seed)
    lexicon = invented_names(cfg.lexicon)
    names = [lexicon[i % cfg.lexicon] if cfg.lexicon else None for i in range(cfg.n_stories)]
    return [" ".join(_frame(r, name) for _ in range(cfg.frames)) for name in names]


def write_stories(stories: list[str], path: str | os.PathLike) -> None:
    """One UTF-8 file, stories separated by a `<|endoftext|>` line (TinyStories format)."""
    text = "".join(f"{story}\n{DOC_SEPARATOR}\n" for story in stories)
    with atomic_path(path) as tmp:
        tmp.write_bytes(text.encode("utf-8"))
