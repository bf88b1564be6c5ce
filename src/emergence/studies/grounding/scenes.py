"""Synthetic visual dialogue: small drawn scenes with captions and Q&A in VisDial v1.0 format.

The embedded default of study G's visual-dialogue extension, so the real
VisDial reader and image encoder run offline. A scene holds 1..max_objects
nouns, each drawn as its fixed visual identity (a shape plus an inner mark in
the noun's own pattern and signature colour: the image alone tells which noun
it is) with a body colour, size and position that vary per scene. The
caption names every object with some of its attributes; each dialogue round
asks about a present object with probability p_present_mention, otherwise
about an absent one ("is there a dog" -> "no") or the object count. Text
follows real VisDial: lower case, questions without "?", answers with commas
("yes, there is a red dog"). Nouns keep their `_` (teddy_bear) so each stays
one word.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from math import cos, pi, sin
from pathlib import Path
from typing import Annotated

from annotated_types import Ge, Le
from PIL import Image, ImageChops, ImageDraw

from emergence.core.io import PipelineError, atomic_path
from emergence.core.rules import field_problems

SHAPES = ("circle", "square", "triangle", "diamond", "cross", "star", "hexagon")
MARKS = ("stripes", "dot", "ring", "checks")  # patterns drawn inside the shape
# A noun's mark has its own signature colour, from a palette disjoint from the body colours (COLOURS),
# so the body colour stays a per-scene attribute that the dialogue asks about.
MARK_COLOURS = {"black": (0, 0, 0), "white": (255, 255, 255), "cyan": (0, 200, 220), "magenta": (210, 0, 210)}
IDENTITIES = len(MARKS) * len(MARK_COLOURS)  # nouns with their own mark: (pattern, colour) alone tells the noun
COLOURS = {
    "red": (220, 40, 40),
    "blue": (40, 80, 220),
    "green": (40, 160, 60),
    "yellow": (235, 210, 40),
    "orange": (240, 140, 30),
    "purple": (140, 60, 180),
    "pink": (240, 130, 180),
    "brown": (140, 90, 40),
}
SIZES = {"small": 0.2, "big": 0.3}  # object diameter / image side
POSITIONS = {"left": (0.2, 0.5), "middle": (0.5, 0.5), "right": (0.8, 0.5), "top": (0.5, 0.2), "bottom": (0.5, 0.8)}
WHERE = {
    "left": "on the left",
    "right": "on the right",
    "middle": "in the middle",
    "top": "at the top",
    "bottom": "at the bottom",
}
COUNTS = ("zero", "one", "two", "three", "four", "five")
BACKGROUND = (230, 230, 230)
SUPERSAMPLE = 4  # masks are drawn 4x larger and box-filtered down: smooth edges
ATTRIBUTE_WORDS = set(COLOURS) | set(SIZES) | set(POSITIONS) | set(COUNTS)
P_COUNT = 0.25  # a round without a present mention asks the object count instead of an absent object

CAPTION_FRAMES = (
    "{objs}",
    "a picture of {objs}",
    "there is {objs}",
    "this image shows {objs}",
    "{objs} on a grey background",
    "i can see {objs}",
)
EXIST_Q = ("is there {an}", "do you see {an}", "is there {an} in the picture", "can you see {an}")
NO_A = ("no", "no, there is no {n}", "no, there isn't", "no, i don't see {an}")
COUNT_Q = ("how many objects are there", "how many things are in the picture", "how many objects can you see")
COUNT_A = ("{k}", "there {be} {k}", "i see {k}")
# Rounds about a present object, by kind: (question frames, answer frames). {cn}/{sn} are the
# noun with its colour/size and article ("an orange dog"), {w} its place ("on the left").
PRESENT_QA = {
    "exist": (EXIST_Q, ("yes", "yes, there is {cn}", "yes, {sn}", "yes, {cn} {w}")),
    "colour": (("what color is the {n}", "what colour is the {n}"), ("{c}", "it is {c}", "the {n} is {c}")),
    "where": (("where is the {n}", "where is the {n} in the picture"), ("{w}", "it is {w}", "the {n} is {w}")),
    "size": (("how big is the {n}", "is the {n} big or small"), ("{s}", "it is {s}", "it is {sn}")),
    "what": (("what is {w}", "what do you see {w}"), ("{cn}", "{sn}", "there is {cn}")),
}
NOUN_RE = re.compile(r"[a-z]+(_[a-z]+)*")
# Words naming the picture itself rather than a thing in it, as real VisDial dialogues use them too
# ("is the photo in color"); with the frames' and attribute words they are never target nouns.
PICTURE_WORDS = frozenset({"picture", "image", "photo", "photograph", "pic", "background", "foreground"})

Obj = tuple[str, str, str, str]  # (noun, colour, size, position)


@dataclass
class SceneParams:
    n_images: Annotated[int, Ge(1)] = 600
    n_nouns: Annotated[int, Ge(2), Le(IDENTITIES)] = 16  # the first n_nouns of `nouns`, each its own identity
    image_size: Annotated[int, Ge(32)] = 112
    max_objects: Annotated[int, Ge(1), Le(len(POSITIONS))] = 3  # objects never share a position
    rounds: Annotated[int, Ge(1)] = 10
    n_options: Annotated[int, Ge(2)] = 10
    p_present_mention: Annotated[float, Ge(0), Le(1)] = 0.85  # a round asks about an object in the image
    seed: Annotated[int, Ge(0)] = 0
    nouns: tuple[str, ...] = ()  # empty = the noun list (paths.grounding_nouns)

    def inventory(self, noun_list: Sequence[str], where: str) -> tuple[str, ...]:
        """The scenes' n_nouns objects: the first of `nouns`, else of the noun list; checked."""
        pool = tuple(self.nouns or noun_list)
        if self.n_nouns > len(pool):
            raise PipelineError(f"{where}.n_nouns: the noun list has {len(pool)} nouns, got {self.n_nouns}")
        chosen = pool[: self.n_nouns]
        excluded = non_object_words()
        bad = [n for n in chosen if not NOUN_RE.fullmatch(n) or n in excluded]
        if bad or len(set(chosen)) != len(chosen):
            raise PipelineError(
                f"{where}.nouns: need distinct lower-case words that are not colour, size, "
                f"position, count or frame words; bad: {bad or 'duplicates'}"
            )
        return chosen

    def validate(self, where: str) -> None:
        """The declared bounds too (write_scenes takes params built in code), then the rules a bound cannot say."""
        if problems := field_problems(self, where):
            raise PipelineError("\n".join(problems))
        if self.n_nouns <= self.max_objects:  # some noun must stay absent from every scene
            raise PipelineError(f"{where}.n_nouns: must exceed max_objects ({self.max_objects}), got {self.n_nouns}")
        if self.nouns:  # named here: checked now; else with the noun list, when the scenes are written
            self.inventory(self.nouns, where)


def non_object_words() -> frozenset[str]:
    """Words that never name an object of a scene: every word of the caption and dialogue frames
    ("a picture of ...", "... on a grey background", "is there ... in the picture"), the attribute
    words (colour, size, position, count) and PICTURE_WORDS."""
    qa = [frame for frames in PRESENT_QA.values() for group in frames for frame in group]
    frames = (*CAPTION_FRAMES, *EXIST_Q, *NO_A, *COUNT_Q, *COUNT_A, *WHERE.values(), *qa)
    words = {w for frame in frames for w in re.findall(r"[a-z]+", re.sub(r"\{\w+\}", " ", frame))}
    return frozenset(words | ATTRIBUTE_WORDS | PICTURE_WORDS)


def object_nouns(nouns: Sequence[str]) -> list[str]:
    """The nouns that can name a thing in an image: `nouns` without non_object_words (visual targets)."""
    excluded = non_object_words()
    return [n for n in nouns if n not in excluded]


@dataclass
class Scene:
    objects: list[Obj]


def noun_identities(nouns: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """noun i -> (shape, mark, mark colour): the mark and its colour differ for every noun, the shape cycles
    on top. The mark carries the identity because a randomly initialised encoder (the default here) keeps
    colour and texture but not outlines (docs/grounding.md: visual dialogue); a pretrained one sees all three."""
    if len(nouns) > IDENTITIES:
        raise PipelineError(f"nouns: only {IDENTITIES} distinct visual identities, got {len(nouns)} nouns")
    colours = list(MARK_COLOURS)
    return {n: (SHAPES[i % len(SHAPES)], MARKS[i % len(MARKS)], colours[i // len(MARKS)]) for i, n in enumerate(nouns)}


def sample_scene(rng: random.Random, nouns: Sequence[str], params: SceneParams) -> Scene:
    k = rng.randint(1, params.max_objects)
    positions = rng.sample(list(POSITIONS), k)  # distinct positions: objects never stack
    return Scene(
        [
            (n, rng.choice(list(COLOURS)), rng.choice(list(SIZES)), p)
            for n, p in zip(rng.sample(list(nouns), k), positions)
        ]
    )


def _outline(draw: ImageDraw.ImageDraw, shape: str, d: int) -> None:
    """Fill `shape` into a d x d mask; points are in [-1, 1] unit coordinates."""

    def px(points):
        return [((x + 1) * (d - 1) / 2, (y + 1) * (d - 1) / 2) for x, y in points]

    if shape == "circle":
        draw.ellipse((0, 0, d - 1, d - 1), fill=255)
        return
    w = 0.33  # cross arm half-width
    polygons = {
        "square": [(-0.85, -0.85), (0.85, -0.85), (0.85, 0.85), (-0.85, 0.85)],
        "triangle": [(0, -1), (1, 0.8), (-1, 0.8)],
        "diamond": [(0, -1), (1, 0), (0, 1), (-1, 0)],
        "cross": [
            (-w, -1),
            (w, -1),
            (w, -w),
            (1, -w),
            (1, w),
            (w, w),
            (w, 1),
            (-w, 1),
            (-w, w),
            (-1, w),
            (-1, -w),
            (-w, -w),
        ],
        "star": [(r * sin(i * pi / 5), -r * cos(i * pi / 5)) for i, r in zip(range(10), (1, 0.45) * 5)],
        "hexagon": [(cos(i * pi / 3), sin(i * pi / 3)) for i in range(6)],
    }
    draw.polygon(px(polygons[shape]), fill=255)


@cache
def _masks(shape: str, mark: str, d: int) -> tuple[Image.Image, Image.Image]:
    """(shape mask, mark mask) of a d-pixel object; the mark is clipped to the shape."""
    big = d * SUPERSAMPLE
    body = Image.new("L", (big, big))
    _outline(ImageDraw.Draw(body), shape, big)
    mark_img = Image.new("L", (big, big))
    draw = ImageDraw.Draw(mark_img)
    period = big // 4
    if mark == "stripes":  # diagonal, so they never line up with the cross's arms
        for x in range(-big, big, period):
            draw.line((x, big, x + big, 0), fill=255, width=max(1, period // 3))
    elif mark == "checks":
        for y in range(0, big, period):
            for x in range((y // period) % 2 * period, big, 2 * period):
                draw.rectangle((x, y, x + period - 1, y + period - 1), fill=255)
    else:  # a centred dot (radius 0.3) or ring (0.2-0.4): inside every shape, the ring clipped by the cross
        outer, inner = (0.3, 0.0) if mark == "dot" else (0.4, 0.2)
        for r, fill in ((outer * big / 2, 255), (inner * big / 2, 0)):
            draw.ellipse((big / 2 - r, big / 2 - r, big / 2 + r, big / 2 + r), fill=fill)
    mark_img = ImageChops.multiply(mark_img, body)
    return (body.resize((d, d), Image.Resampling.BOX), mark_img.resize((d, d), Image.Resampling.BOX))


def draw_scene(scene: Scene, identities: dict[str, tuple[str, ...]], size: int) -> Image.Image:
    img = Image.new("RGB", (size, size), BACKGROUND)
    for noun, colour, obj_size, pos in scene.objects:
        d = round(SIZES[obj_size] * size)
        shape, mark, mark_colour = identities[noun]
        body, mark_mask = _masks(shape, mark, d)
        cx, cy = POSITIONS[pos]
        corner = (round(cx * size - d / 2), round(cy * size - d / 2))
        img.paste(COLOURS[colour], corner + (corner[0] + d, corner[1] + d), body)
        img.paste(MARK_COLOURS[mark_colour], corner + (corner[0] + d, corner[1] + d), mark_mask)
    return img


def _article(phrase: str) -> str:
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def _describe(obj: Obj, rng: random.Random) -> str:
    """An object with a random subset of its attributes: 'a red ball', 'a small cup on the left'."""
    noun, colour, size, pos = obj
    words = rng.choice(((colour,), (size,), (size, colour), ()))
    phrase = _article(" ".join(words + (noun,)))
    return f"{phrase} {WHERE[pos]}" if rng.random() < 0.4 else phrase


def caption_of(scene: Scene, rng: random.Random) -> str:
    parts = [_describe(o, rng) for o in scene.objects]
    objs = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    return rng.choice(CAPTION_FRAMES).format(objs=objs)


def _present_round(obj: Obj, rng: random.Random) -> tuple[str, str]:
    noun, colour, size, pos = obj
    qs, answers = PRESENT_QA[rng.choice(list(PRESENT_QA))]
    fill = dict(
        n=noun,
        an=_article(noun),
        c=colour,
        s=size,
        w=WHERE[pos],
        cn=_article(f"{colour} {noun}"),
        sn=_article(f"{size} {noun}"),
    )
    return rng.choice(qs).format(**fill), rng.choice(answers).format(**fill)


def dialog_of(scene: Scene, nouns: Sequence[str], rng: random.Random, params: SceneParams) -> list[tuple[str, str]]:
    present = {o[0] for o in scene.objects}
    absent = [n for n in nouns if n not in present]
    rounds = []
    for _ in range(params.rounds):
        if rng.random() < params.p_present_mention:
            rounds.append(_present_round(rng.choice(scene.objects), rng))
        elif rng.random() < P_COUNT or not absent:
            k = len(scene.objects)
            rounds.append((rng.choice(COUNT_Q), rng.choice(COUNT_A).format(k=COUNTS[k], be="is" if k == 1 else "are")))
        else:
            n = rng.choice(absent)
            rounds.append((rng.choice(EXIST_Q).format(an=_article(n)), rng.choice(NO_A).format(n=n, an=_article(n))))
    return rounds


def _index(pool: dict[str, int], text: str) -> int:
    return pool.setdefault(text, len(pool))


def write_scenes(out_dir: Path, params: SceneParams, noun_list: Sequence[str], where: str = "scenes") -> dict:
    """Write out_dir/visdial_synthetic.json and out_dir/images/<image_id:012d>.png, the objects drawn from
    `noun_list` unless params.nouns names them; same inputs, same bytes."""
    params.validate(where)
    nouns = params.inventory(noun_list, where)
    identities = noun_identities(nouns)
    rng = random.Random(params.seed)
    questions: dict[str, int] = {}
    answers: dict[str, int] = {}
    dialogs, scenes = [], []
    for image_id in range(1, params.n_images + 1):
        scene = sample_scene(rng, nouns, params)
        caption = caption_of(scene, rng)
        rounds = [(_index(questions, q), _index(answers, a)) for q, a in dialog_of(scene, nouns, rng, params)]
        scenes.append(scene)
        dialogs.append(
            {"image_id": image_id, "caption": caption, "dialog": [{"question": q, "answer": a} for q, a in rounds]}
        )
    if len(answers) < params.n_options:
        raise PipelineError(
            f"{where}.n_options: only {len(answers)} distinct answers were generated, got n_options {params.n_options}"
        )
    opt_rng = random.Random(f"options-{params.seed}")  # own stream: n_options never changes the text
    for d in dialogs:
        for r in d["dialog"]:
            others = [i + (i >= r["answer"]) for i in opt_rng.sample(range(len(answers) - 1), params.n_options - 1)]
            r["gt_index"] = opt_rng.randrange(params.n_options)
            r["answer_options"] = others[: r["gt_index"]] + [r["answer"]] + others[r["gt_index"] :]
    data = {"questions": list(questions), "answers": list(answers), "dialogs": dialogs}
    with atomic_path(out_dir) as tmp:
        (tmp / "images").mkdir(parents=True)
        for d, scene in zip(dialogs, scenes):
            img = draw_scene(scene, identities, params.image_size)
            img.save(tmp / "images" / f"{d['image_id']:012d}.png", format="PNG", optimize=False)
        text = json.dumps({"version": "1.0", "split": "synthetic", "data": data})
        (tmp / "visdial_synthetic.json").write_bytes((text + "\n").encode("utf-8"))
    return {
        "images": params.n_images,
        "dialogs": len(dialogs),
        "questions": len(questions),
        "answers": len(answers),
        "rounds": params.rounds * len(dialogs),
    }
