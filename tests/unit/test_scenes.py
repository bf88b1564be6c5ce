import hashlib
import io
import json
import random
import re
from dataclasses import replace
from itertools import combinations
from math import cos, pi, radians, sin
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw
from refusals import assert_refused, refuses, refuses_key

from emergence.core.io import PipelineError
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.scenes import (
    BACKGROUND,
    COLOURS,
    COUNTS,
    MARK_COLOURS,
    MARKS,
    SHAPES,
    Scene,
    SceneParams,
    _outline,
    caption_of,
    dialog_of,
    draw_scene,
    non_object_words,
    noun_identities,
    object_nouns,
    sample_scene,
    write_scenes,
)
from emergence.studies.grounding.tokens import VocabParams, target_vocabulary
from emergence.studies.grounding.visdial import extract_dialogs

CDI_NOUNS = read_nouns(Path(__file__).parents[2] / "resources" / "grounding" / "nouns.tsv")  # the shipped list

pytestmark = pytest.mark.usefixtures("one_thread")

TINY = SceneParams(n_images=12, n_nouns=8, image_size=48, rounds=4, n_options=5, seed=1)


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z_]+", text)


def _digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _scenes(params: SceneParams, n: int = 100) -> list[tuple[Scene, str, list[tuple[str, str]]]]:
    rng, nouns = random.Random(params.seed), params.inventory(CDI_NOUNS, "v")
    out = []
    for _ in range(n):
        scene = sample_scene(rng, nouns, params)
        out.append((scene, caption_of(scene, rng), dialog_of(scene, nouns, rng, params)))
    return out


def test_identities_are_distinct_and_bounded():
    nouns = SceneParams().inventory(CDI_NOUNS, "v")
    assert nouns == CDI_NOUNS[:16]
    ids = noun_identities(nouns)
    assert list(ids) == list(nouns) and len({(m, c) for _, m, c in ids.values()}) == 16  # the mark alone tells
    assert noun_identities(nouns) == ids  # fixed, not random
    assert all(s in SHAPES and m in MARKS and c in MARK_COLOURS for s, m, c in ids.values())
    assert not set(MARK_COLOURS.values()) & set(COLOURS.values())  # no body colour hides a mark or names it
    n = len(MARKS) * len(MARK_COLOURS)
    with refuses("nouns", f"only {n}", f"got {n + 1}"):
        noun_identities(CDI_NOUNS[: n + 1])


@pytest.mark.parametrize("colour", ["yellow", "brown"])
def test_image_alone_tells_every_pair_of_nouns_apart(colour):
    nouns = SceneParams().inventory(CDI_NOUNS, "v")
    ids = noun_identities(nouns)
    imgs = {n: np.asarray(draw_scene(Scene([(n, colour, "small", "left")]), ids, 112), dtype=int) for n in nouns}
    for a, b in combinations(nouns, 2):
        changed = (np.abs(imgs[a] - imgs[b]).sum(axis=2) > 60).sum()
        assert changed >= 20, (a, b, ids[a], ids[b], changed)
    blank = np.asarray(draw_scene(Scene([]), ids, 112), dtype=int)
    drawn = np.abs(imgs["bear"] - blank).sum(axis=2) > 0
    ys, xs = np.nonzero(drawn)  # small (0.2 * 112 px) and centred at the left position (0.2, 0.5)
    assert xs.min() >= 10 and xs.max() <= 34 and ys.min() >= 44 and ys.max() <= 68


def test_every_mark_shows_in_its_colour_at_the_small_size():
    ids = noun_identities(SceneParams().inventory(CDI_NOUNS, "v"))
    for noun, (_, _, mark_colour) in ids.items():
        img = np.asarray(draw_scene(Scene([(noun, "yellow", "small", "left")]), ids, 112)).reshape(-1, 3)
        assert (img == MARK_COLOURS[mark_colour]).all(axis=1).sum() >= 16, (noun, ids[noun])


def test_each_noun_carries_its_own_mark():
    """A dot fills the object's centre, a ring leaves it in the body colour and marks a point 0.15 d above it
    (the ring spans 0.1 d to 0.2 d from the centre): the mark drawn is the noun's, not one for all."""
    ids = noun_identities(SceneParams().inventory(CDI_NOUNS, "v"))
    seen = set()
    for noun, (_, mark, mark_colour) in ids.items():
        if mark not in ("dot", "ring"):
            continue
        img = np.asarray(draw_scene(Scene([(noun, "yellow", "big", "middle")]), ids, 112))  # d = 34, centre 56
        centre = {tuple(int(v) for v in px) for px in img[55:58, 55:58].reshape(-1, 3)}
        above = tuple(int(v) for v in img[51, 56])  # 5 px = 0.15 d above the centre
        if mark == "dot":
            assert centre == {MARK_COLOURS[mark_colour]}, noun
        else:
            assert centre == {COLOURS["yellow"]} and above == MARK_COLOURS[mark_colour], noun
        seen.add(mark)
    assert seen == {"dot", "ring"}


def test_scene_attributes_change_the_image():
    ids = noun_identities(SceneParams().inventory(CDI_NOUNS, "v"))
    base = np.asarray(draw_scene(Scene([("dog", "red", "small", "left")]), ids, 64))
    for other in [("dog", "blue", "small", "left"), ("dog", "red", "big", "left"), ("dog", "red", "small", "top")]:
        assert not np.array_equal(base, np.asarray(draw_scene(Scene([other]), ids, 64))), other
    img = draw_scene(Scene([("bear", "green", "big", "middle")]), ids, 64)
    assert img.mode == "RGB" and img.size == (64, 64)
    pixels = {tuple(int(v) for v in px) for px in np.asarray(img).reshape(-1, 3)}
    assert {COLOURS["green"], MARK_COLOURS[ids["bear"][2]]} <= pixels  # the body's scene colour, the noun's mark


def test_scenes_are_well_formed():
    params = replace(TINY, max_objects=3)
    for scene, _, rounds in _scenes(params):
        nouns = [o[0] for o in scene.objects]
        positions = [o[3] for o in scene.objects]
        assert 1 <= len(nouns) <= 3 and len(set(nouns)) == len(nouns) and len(set(positions)) == len(positions)
        assert set(nouns) <= set(params.inventory(CDI_NOUNS, "v")) and len(rounds) == params.rounds


def test_caption_names_every_present_object_and_only_true_attributes():
    params = replace(TINY, n_nouns=16)
    for scene, caption, _ in _scenes(params):
        words = _words(caption)
        present = {o[0] for o in scene.objects}
        assert present <= set(words), (scene, caption)
        assert not (set(params.inventory(CDI_NOUNS, "v")) - present) & set(words), caption
        assert set(words) & set(COLOURS) <= {o[1] for o in scene.objects}, (scene, caption)
        assert set(words) & {"small", "big"} <= {o[2] for o in scene.objects}, (scene, caption)


def test_dialogue_mentions_present_objects_more_than_absent_ones():
    params = replace(TINY, n_nouns=16, rounds=10)
    present_rounds = absent_rounds = 0
    for scene, _, rounds in _scenes(params):
        present = {o[0] for o in scene.objects}
        for q, a in rounds:
            named = set(_words(q + " " + a)) & set(params.inventory(CDI_NOUNS, "v"))
            present_rounds += bool(named & present)
            absent_rounds += bool(named - present)
            assert len(named) <= 1, (q, a)
    # 0.85 of rounds name a present object, 0.15 * 0.75 an absent one
    assert 0.8 < present_rounds / 1000 < 0.9 and 0.07 < absent_rounds / 1000 < 0.16
    never = replace(params, p_present_mention=0.0)
    for scene, _, rounds in _scenes(never):
        present = {o[0] for o in scene.objects}
        assert not any(set(_words(q + " " + a)) & present for q, a in rounds)


def test_answers_are_true_of_the_scene():
    for scene, _, rounds in _scenes(replace(TINY, n_nouns=16, rounds=10)):
        by_noun = {o[0]: o for o in scene.objects}
        for q, a in rounds:
            words = _words(q + " " + a)
            named = [w for w in words if w in by_noun]
            if q.startswith("how many"):
                assert COUNTS[len(scene.objects)] in _words(a), (scene, q, a)
            elif not named:  # an absent object: always denied
                assert a.startswith("no"), (scene, q, a)
            else:
                _, colour, size, pos = by_noun[named[0]]
                assert not a.startswith("no")
                assert set(_words(a)) & set(COLOURS) <= {colour}, (scene, q, a)
                assert set(_words(a)) & {"small", "big"} <= {size}, (scene, q, a)
                place = set(_words(q + " " + a)) & {"left", "right", "middle", "top", "bottom"}
                assert place <= {pos}, (scene, q, a)


def test_written_json_follows_visdial_and_images_match(tmp_path):
    counts = write_scenes(tmp_path / "out", TINY, CDI_NOUNS)
    doc = json.loads((tmp_path / "out" / "visdial_synthetic.json").read_text())
    assert doc["version"] == "1.0" and doc["split"] == "synthetic"
    data = doc["data"]
    qs, ans, dialogs = data["questions"], data["answers"], data["dialogs"]
    assert len(set(qs)) == len(qs) and len(set(ans)) == len(ans)  # de-duplicated pools
    assert counts == {"images": 12, "dialogs": 12, "questions": len(qs), "answers": len(ans), "rounds": 48}
    assert [d["image_id"] for d in dialogs] == list(range(1, 13))
    gt_positions = set()
    for d in dialogs:
        assert isinstance(d["caption"], str) and d["caption"] == d["caption"].lower()
        assert len(d["dialog"]) == TINY.rounds
        for r in d["dialog"]:
            assert set(r) == {"question", "answer", "answer_options", "gt_index"}
            assert 0 <= r["question"] < len(qs) and 0 <= r["answer"] < len(ans)
            opts = r["answer_options"]
            assert len(opts) == TINY.n_options == len(set(opts)) and all(0 <= o < len(ans) for o in opts)
            assert opts[r["gt_index"]] == r["answer"]
            gt_positions.add(r["gt_index"])
            assert not qs[r["question"]].endswith("?")  # as in real VisDial
        img = Image.open(tmp_path / "out" / "images" / f"{d['image_id']:012d}.png")
        assert img.mode == "RGB" and img.size == (48, 48)
    assert gt_positions == set(range(TINY.n_options))  # the true answer takes every slot, the last one too
    assert len(list((tmp_path / "out" / "images").iterdir())) == 12


def test_output_is_byte_identical_and_replaces_the_directory(tmp_path):
    write_scenes(tmp_path / "a", TINY, CDI_NOUNS)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "stale.png").write_bytes(b"old")
    write_scenes(tmp_path / "b", TINY, CDI_NOUNS)
    assert _digest(tmp_path / "a") == _digest(tmp_path / "b")  # stale file gone with the old directory
    write_scenes(tmp_path / "c", replace(TINY, seed=2), CDI_NOUNS)
    assert _digest(tmp_path / "a") != _digest(tmp_path / "c")
    write_scenes(tmp_path / "d", replace(TINY, n_options=3), CDI_NOUNS)  # options draw from their own stream
    a = json.loads((tmp_path / "a" / "visdial_synthetic.json").read_text())["data"]
    d = json.loads((tmp_path / "d" / "visdial_synthetic.json").read_text())["data"]
    assert a["questions"] == d["questions"] and a["answers"] == d["answers"]


@pytest.mark.parametrize(
    "change, key",
    [
        ({"n_images": 0}, "n_images"),
        ({"n_nouns": 17}, "n_nouns"),
        ({"n_nouns": 3, "max_objects": 3}, "n_nouns"),
        ({"image_size": 16}, "image_size"),
        ({"max_objects": 6, "n_nouns": 16}, "max_objects"),
        ({"rounds": 0}, "rounds"),
        ({"n_options": 1}, "n_options"),
        ({"p_present_mention": 1.2}, "p_present_mention"),
        ({"seed": -1}, "seed"),
        ({"nouns": ("dog", "red", "cat", "cup"), "n_nouns": 4, "max_objects": 2}, "nouns"),
        ({"nouns": ("dog", "dog", "cat"), "n_nouns": 3, "max_objects": 2}, "nouns"),
        ({"nouns": ("dog", "picture", "cat", "cup"), "n_nouns": 4, "max_objects": 2}, "nouns"),
        ({"n_options": 5000}, "n_options"),  # more options than distinct answers: caught while writing
    ],
)
def test_bad_params_name_the_key_and_write_nothing(tmp_path, change, key):
    params = replace(TINY, **change)
    if key != "n_options" or change["n_options"] < 2:
        with pytest.raises(PipelineError, match=rf"^visdial_g\.{key}: "):
            params.validate("visdial_g")
    with pytest.raises(PipelineError, match=rf"^visdial_g\.{key}: "):
        write_scenes(tmp_path / "out", params, CDI_NOUNS, where="visdial_g")
    assert not list(tmp_path.iterdir())


def test_custom_nouns_are_used(tmp_path):
    params = replace(TINY, nouns=("ball", "cup", "teddy_bear", "shoe", "spoon"), n_nouns=4, max_objects=2)
    write_scenes(tmp_path / "out", params, CDI_NOUNS)
    data = json.loads((tmp_path / "out" / "visdial_synthetic.json").read_text())["data"]
    words = {w for d in data["dialogs"] for w in _words(d["caption"])}
    assert {"ball", "cup", "teddy_bear", "shoe"} & words and "spoon" not in words and "bear" not in words


def test_frame_and_attribute_words_never_become_visual_targets(tmp_path):
    params = replace(TINY, n_images=150, n_nouns=16, rounds=10)
    write_scenes(tmp_path / "out", params, CDI_NOUNS)
    dialogs = extract_dialogs(tmp_path / "out" / "visdial_synthetic.json")
    vocab = VocabParams(n_words=3, min_count=5)
    # "a picture of ...", "is there a dog in the picture": a CDI noun that the frames make frequent
    assert "picture" in target_vocabulary(dialogs, CDI_NOUNS, vocab, "visual_vocab")[0]
    targets = target_vocabulary(dialogs, object_nouns(CDI_NOUNS), vocab, "visual_vocab")[0]
    assert len(targets) == 3 and set(targets) <= set(params.inventory(CDI_NOUNS, "v"))
    excluded = non_object_words()
    assert {"picture", "image", "background", "photo", "orange", "red", "big", "left", "three"} <= excluded
    assert not excluded & set(params.inventory(CDI_NOUNS, "v"))
    assert object_nouns(["dog", "picture", "orange", "cup"]) == ["dog", "cup"]


# Shape masks, checked against the documented geometry in [-1, 1] unit coordinates (pixel centre j of a d-pixel
# mask at 2 j / (d - 1) - 1), written here independently of the module's vertex lists.
ARM = 0.33  # the cross's arm half-width
STAR_POINTS = [(r * cos(radians(90 - 36 * k)), -r * sin(radians(90 - 36 * k))) for k, r in enumerate([1, 0.45] * 5)]
TIPS = {  # pointed vertices: PIL may set a pixel or two past them, so pixels near them are not judged outside
    "triangle": [(0, -1), (1, 0.8), (-1, 0.8)],
    "star": STAR_POINTS[::2],
    "diamond": [(0, -1), (1, 0), (0, 1), (-1, 0)],
    "hexagon": [(1, 0), (-1, 0)],
}
AREA = {  # exact area / area of the [-1, 1] square
    "circle": pi / 4,
    "square": 0.85**2,
    "triangle": 2 * 1.8 / 2 / 4,
    "diamond": 0.5,
    "cross": (2 * 2 * 2 * ARM - (2 * ARM) ** 2) / 4,
    "star": 10 * 0.5 * 1 * 0.45 * sin(pi / 5) / 4,  # ten triangles centre-point-notch
    "hexagon": 3 * 3**0.5 / 2 / 4,
}


def _in_polygon(x, y, verts):
    inside = np.zeros(np.shape(x), bool)
    for (x1, y1), (x2, y2) in zip(verts, verts[1:] + verts[:1]):
        crosses = (y1 > y) != (y2 > y)
        inside ^= crosses & (x < x1 + (y - y1) * (x2 - x1) / ((y2 - y1) or 1))
    return inside


def _contains(shape, x, y):
    ax, ay = np.abs(x), np.abs(y)
    return {
        "circle": lambda: x**2 + y**2 <= 1,
        "square": lambda: (ax <= 0.85) & (ay <= 0.85),
        "diamond": lambda: ax + ay <= 1,
        "cross": lambda: (ax <= 1) & (ay <= 1) & ((ax <= ARM) | (ay <= ARM)),
        "triangle": lambda: (y <= 0.8) & (y >= -1 + 1.8 * ax),  # apex at the top, base at 0.8
        "hexagon": lambda: (ay <= 3**0.5 / 2) & (3**0.5 * ax + ay <= 3**0.5),  # vertices at (+-1, 0)
        "star": lambda: _in_polygon(x, y, STAR_POINTS),  # a point at the top, inner radius 0.45
    }[shape]()


def _mask(shape: str, d: int) -> np.ndarray:
    img = Image.new("L", (d, d))
    _outline(ImageDraw.Draw(img), shape, d)
    return np.asarray(img)


def _surely(shape: str, d: int, margin: float) -> tuple[np.ndarray, np.ndarray]:
    """(inside, outside): pixels whose whole margin-square around the centre lies in / off the shape."""
    ys, xs = np.mgrid[0:d, 0:d].astype(float)
    unit = [
        _contains(shape, 2 * (xs + sx * margin) / (d - 1) - 1, 2 * (ys + sy * margin) / (d - 1) - 1)
        for sx in (-1, 1)
        for sy in (-1, 1)
    ]
    inside, outside = np.logical_and.reduce(unit), ~np.logical_or.reduce(unit)
    for tx, ty in TIPS.get(shape, []):
        near = (np.abs(xs - (tx + 1) * (d - 1) / 2) <= margin + 1) & (np.abs(ys - (ty + 1) * (d - 1) / 2) <= margin + 1)
        outside &= ~near
    return inside, outside


@pytest.mark.parametrize("d", [33, 64, 65, 101])
@pytest.mark.parametrize("shape", SHAPES)
def test_shape_masks_follow_the_documented_outline(shape, d):
    mask = _mask(shape, d)
    assert set(np.unique(mask)) <= {0, 255}  # a hard mask: the smoothing comes from the 4x supersampling
    on = mask == 255
    inside, outside = _surely(shape, d, 1.25)  # PIL fills polygons to within 1.25 px of the exact outline
    assert on[inside].all() and not on[outside].any(), (shape, d)
    assert abs(on.mean() - AREA[shape]) < 4.5 / d, (shape, on.mean(), AREA[shape])  # about one pixel of perimeter
    touches = {"top": on[0].any(), "bottom": on[-1].any(), "left": on[:, 0].any(), "right": on[:, -1].any()}
    expected = {  # the shapes reaching the unit square's edge; the square (0.85) and the others stop short
        "circle": {"top", "bottom", "left", "right"},
        "diamond": {"top", "bottom", "left", "right"},
        "cross": {"top", "bottom", "left", "right"},
        "triangle": {"top", "left", "right"},  # base at 0.8
        "star": {"top"},  # its side points (x = +-0.95) may round onto the edge column: not judged
        "hexagon": {"left", "right"},  # flat top and bottom at sqrt(3) / 2
        "square": set(),
    }[shape]
    if shape == "star":
        touches = {"top": touches["top"], "bottom": touches["bottom"]}
    assert {side for side, hit in touches.items() if hit} == expected, (shape, d)
    c = (d - 1) // 2
    assert on[c, c]  # every shape covers its centre
    if shape == "cross":  # the notch between two arms is empty, the arms reach the edges at mid-height
        q = round(0.7 * (d - 1) / 2)
        assert not on[c - q, c - q] and not on[c + q, c + q] and not on[c - q, c + q] and not on[c + q, c - q]
        assert on[c, 0] and on[c, d - 1] and on[0, c] and on[d - 1, c]


@pytest.mark.parametrize("d", [65, 101, 257])
def test_circle_and_diamond_masks_are_exactly_symmetric(d):
    """At an odd size both outlines have whole-pixel extremes, so they come out mirror-exact: an ellipse box or a
    unit-to-pixel map one pixel off (d - 1 -> d - 2 or d + 1 on either axis) breaks the mirror on that axis."""
    for shape in ("circle", "diamond"):
        on = _mask(shape, d) == 255
        assert np.array_equal(on, on[:, ::-1]) and np.array_equal(on, on[::-1]), (shape, d)
        assert np.array_equal(on, on.T), (shape, d)
    tri = _mask("triangle", d) == 255  # symmetric left-right only, apex up
    assert np.array_equal(tri, tri[:, ::-1]) and tri[0, (d - 1) // 2] and not tri[-1].any()


def test_params_at_their_bounds_pass_and_one_past_is_refused_in_one_line():
    edge = SceneParams(n_images=1, n_nouns=2, image_size=32, max_objects=1, rounds=1, n_options=2, seed=0)
    edge.validate("g")  # every lower bound itself is allowed
    replace(edge, p_present_mention=0.0).validate("g")
    replace(edge, p_present_mention=1.0).validate("g")
    replace(edge, n_nouns=16, max_objects=5).validate("g")  # 16 identities, 5 positions: both limits allowed
    for change, key, value in [
        ({"n_images": 0}, "n_images", 0),
        ({"n_nouns": 1}, "n_nouns", 1),
        ({"image_size": 31}, "image_size", 31),
        ({"max_objects": 0}, "max_objects", 0),
        ({"rounds": 0}, "rounds", 0),
        ({"n_options": 1}, "n_options", 1),
        ({"seed": -1}, "seed", -1),
        ({"max_objects": 6, "n_nouns": 16}, "max_objects", 6),  # 5 positions
        ({"p_present_mention": -0.01}, "p_present_mention", -0.01),
        ({"p_present_mention": 1.01}, "p_present_mention", 1.01),
        ({"n_nouns": 17}, "n_nouns", 17),  # 16 identities
    ]:
        with pytest.raises(PipelineError) as err:
            replace(edge, **change).validate("g")
        (line,) = str(err.value).splitlines()
        assert_refused([line], f"g.{key}", value)
    for change, key, named in [
        ({"n_nouns": 3, "max_objects": 3}, "g.n_nouns", ["max_objects (3)", "got 3"]),
        ({"nouns": ("dog", "Cat")}, "g.nouns", ["['Cat']"]),
    ]:
        with refuses(key, *named) as err:
            replace(edge, **change).validate("g")
        assert_refused([str(err.value)], key)


def test_inventory_takes_the_named_nouns_first_and_names_what_is_wrong():
    params = SceneParams(n_nouns=3, max_objects=2)
    assert params.inventory(["ball", "cup", "shoe", "spoon"], "g") == ("ball", "cup", "shoe")
    assert params.inventory(["ball", "cup", "shoe"], "g") == ("ball", "cup", "shoe")  # exactly n_nouns: enough
    assert replace(params, nouns=("egg", "hat", "key")).inventory(["ball", "cup", "shoe"], "g") == ("egg", "hat", "key")
    assert params.inventory(["teddy_bear", "cup", "shoe", "red"], "g") == ("teddy_bear", "cup", "shoe")  # 4th unused
    for nouns, key, named in [
        (["ball", "cup"], "g.n_nouns", ["2 nouns", "got 3"]),
        (["ball", "red", "cup"], "g.nouns", ["['red']"]),
        (["ball", "Cup", "shoe"], "g.nouns", ["['Cup']"]),
        (["ball", "two words", "shoe"], "g.nouns", ["['two words']"]),
        (["ball", "cup", "ball"], "g.nouns", ["duplicates"]),
    ]:
        with refuses(key, *named) as err:
            params.inventory(nouns, "g")
        assert_refused([str(err.value)], key)


def test_non_object_words_hold_every_frame_word_and_no_placeholder():
    words = non_object_words()
    frame_words = {
        "picture",
        "there",
        "this",
        "shows",
        "grey",
        "background",
        "can",
        "see",
        "do",
        "you",
        "no",
        "isn",
        "t",
        "don",
        "i",
        "how",
        "many",
        "things",
        "are",
        "is",
        "yes",
        "what",
        "color",
        "colour",
        "where",
        "big",
        "or",
        "small",
        "it",
        "the",
        "on",
        "in",
        "at",
        "left",
        "top",
        "of",
        "a",
    }
    attributes = {"purple", "pink", "five", "zero", "middle", "bottom"}  # only in the attribute lists
    assert frame_words | attributes | {"photograph", "foreground", "pic"} <= words
    assert not {"objs", "an", "cn", "sn", "n", "w", "c", "s", "k", "be", "xx"} & words  # the {placeholders}
    assert len(words) == len(set(words))


OBJ = ("apple", "orange", "big", "left")  # vowel noun and colour, consonant size: both articles show
FILL = {
    "n": "apple",
    "an": "an apple",
    "c": "orange",
    "s": "big",
    "w": "on the left",
    "cn": "an orange apple",
    "sn": "a big apple",
}


def test_present_rounds_use_every_frame_filled_with_the_object():
    from emergence.studies.grounding.scenes import PRESENT_QA

    rounds = dialog_of(
        Scene([OBJ]), ["apple", "egg"], random.Random(3), replace(TINY, rounds=3000, p_present_mention=1.0)
    )
    expected = {(q.format(**FILL), a.format(**FILL)) for qs, ans in PRESENT_QA.values() for q in qs for a in ans}
    assert set(rounds) == expected
    assert {
        ("is there an apple", "yes, there is an orange apple"),
        ("do you see an apple", "yes, a big apple"),
        ("is there an apple in the picture", "yes, an orange apple on the left"),
        ("what colour is the apple", "the apple is orange"),
        ("where is the apple in the picture", "it is on the left"),
        ("is the apple big or small", "it is a big apple"),
        ("what do you see on the left", "an orange apple"),
    } <= set(rounds)


def test_absent_and_count_rounds_deny_the_absent_noun_and_count_right():
    rng, params = random.Random(4), replace(TINY, rounds=2000, p_present_mention=0.0)
    rounds = dialog_of(Scene([OBJ]), ["apple", "egg"], rng, params)
    from emergence.studies.grounding.scenes import COUNT_Q, EXIST_Q

    count = {(q, a) for q in COUNT_Q for a in ("one", "there is one", "i see one")}
    denied = {
        (q.format(an="an egg"), a)
        for q in EXIST_Q
        for a in ("no", "no, there is no egg", "no, there isn't", "no, i don't see an egg")
    }
    assert set(rounds) == count | denied
    assert 0.2 < sum(r in count for r in rounds) / len(rounds) < 0.3  # P_COUNT = 0.25 of the non-present rounds
    two = Scene([OBJ, ("cup", "red", "small", "top")])
    every = dialog_of(two, ["apple", "cup"], rng, replace(params, rounds=200))  # nothing absent: always a count
    assert {a for _, a in every} == {"two", "there are two", "i see two"}
    assert {q for q, _ in every} == set(COUNT_Q)


def _desc(noun, colour, size, where):
    return rf"an? (?:{size} )?(?:{colour} )?{noun}(?: {where})?"


def test_captions_name_each_object_with_its_own_attributes_in_a_list():
    from emergence.studies.grounding.scenes import CAPTION_FRAMES

    rng = random.Random(5)
    one = {caption_of(Scene([OBJ]), rng) for _ in range(3000)}
    phrases = ["an apple", "an orange apple", "a big apple", "a big orange apple"]
    assert one == {f.format(objs=p + w) for f in CAPTION_FRAMES for p in phrases for w in ("", " on the left")}
    objs = [OBJ, ("cup", "red", "small", "middle"), ("egg", "blue", "big", "right")]
    d = [
        _desc("apple", "orange", "big", "on the left"),
        _desc("cup", "red", "small", "in the middle"),
        _desc("egg", "blue", "big", "on the right"),
    ]
    for scene, listed in [(Scene(objs[:2]), f"{d[0]} and {d[1]}"), (Scene(objs), f"{d[0]}, {d[1]} and {d[2]}")]:
        frames = "|".join(re.escape(f).replace(re.escape("{objs}"), f"(?:{listed})") for f in CAPTION_FRAMES)
        for _ in range(200):
            caption = caption_of(scene, rng)
            assert re.fullmatch(frames, caption), caption


def test_default_where_and_noun_list_errors_name_the_block(tmp_path):
    with refuses_key("scenes.n_images", 0):
        write_scenes(tmp_path / "a", replace(TINY, n_images=0), CDI_NOUNS)
    with refuses("['red']") as err:  # the noun list's own word
        write_scenes(tmp_path / "b", replace(TINY, n_nouns=4, max_objects=2), ["dog", "red", "cat", "cup"], "visdial_g")
    assert_refused([str(err.value)], "visdial_g.nouns")
    assert not list(tmp_path.iterdir())


def test_as_many_options_as_answers_uses_every_answer_once(tmp_path):
    n_answers = write_scenes(tmp_path / "a", TINY, CDI_NOUNS)["answers"]
    write_scenes(tmp_path / "b", replace(TINY, n_options=n_answers), CDI_NOUNS)  # exactly enough answers
    data = json.loads((tmp_path / "b" / "visdial_synthetic.json").read_text())["data"]
    for d in data["dialogs"]:
        for r in d["dialog"]:
            assert (
                sorted(r["answer_options"]) == list(range(n_answers))
                and r["answer_options"][r["gt_index"]] == r["answer"]
            )
    with refuses(f"only {n_answers}", f"n_options {n_answers + 1}") as err:
        write_scenes(tmp_path / "c", replace(TINY, n_options=n_answers + 1), CDI_NOUNS)
    assert_refused([str(err.value)], "scenes.n_options")


def test_written_files_hold_each_scene_as_drawn_and_plain_json(tmp_path):
    params = replace(TINY, n_images=3)
    write_scenes(tmp_path / "out", params, CDI_NOUNS)
    nouns = params.inventory(CDI_NOUNS, "v")
    ids, rng = noun_identities(nouns), random.Random(params.seed)
    raw = (tmp_path / "out" / "visdial_synthetic.json").read_bytes()
    doc = json.loads(raw)
    assert raw == (json.dumps(doc) + "\n").encode()  # one line, json's default separators, key order as written
    assert list(doc) == ["version", "split", "data"] and list(doc["data"]) == ["questions", "answers", "dialogs"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["images", "visdial_synthetic.json"]
    assert sorted(p.name for p in (tmp_path / "out" / "images").iterdir()) == [
        "000000000001.png",
        "000000000002.png",
        "000000000003.png",
    ]
    for d in doc["data"]["dialogs"]:  # image k shows the scene whose caption dialog k holds
        scene = sample_scene(rng, nouns, params)
        assert d["caption"] == caption_of(scene, rng)
        dialog_of(scene, nouns, rng, params)
        path = tmp_path / "out" / "images" / f"{d['image_id']:012d}.png"
        img = Image.open(path)
        assert img.format == "PNG" and np.array_equal(np.asarray(img), np.asarray(draw_scene(scene, ids, 48)))
        plain = io.BytesIO()
        img.save(plain, format="PNG")  # PIL's default PNG: no optimize pass over every image
        assert path.read_bytes() == plain.getvalue()


@pytest.mark.parametrize("size", [100, 120])
def test_each_object_is_centred_on_its_position_at_its_size(size):
    ids = {"ball": ("circle", "dot", "black"), "box": ("square", "ring", "white")}
    blank = np.asarray(draw_scene(Scene([]), ids, size), dtype=int)
    assert (blank == BACKGROUND).all()
    for noun, obj_size, pos in [("ball", "small", "left"), ("ball", "big", "top"), ("box", "big", "right")]:
        img = np.asarray(draw_scene(Scene([(noun, "red", obj_size, pos)]), ids, size), dtype=int)
        ys, xs = np.nonzero(np.abs(img - blank).sum(axis=2) > 0)
        cx, cy = {"left": (0.2, 0.5), "top": (0.5, 0.2), "right": (0.8, 0.5)}[pos]
        d = {"small": 0.2, "big": 0.3}[obj_size] * size  # the object's diameter in pixels
        assert abs(xs.mean() + 0.5 - cx * size) < 0.6 and abs(ys.mean() + 0.5 - cy * size) < 0.6, (noun, pos)
        span = 1 if noun == "ball" else 0.85  # the circle fills its box, the square 0.85 of it
        assert abs(xs.max() - xs.min() + 1 - span * d) <= 1.5 and abs(ys.max() - ys.min() + 1 - span * d) <= 1.5
        mark = (img == MARK_COLOURS[ids[noun][2]]).all(axis=2)  # the mark inside the body, around its centre
        my, mx = np.nonzero(mark)
        assert mark.any() and abs(mx.mean() + 0.5 - cx * size) < 0.6 and abs(my.mean() + 0.5 - cy * size) < 0.6


def test_identity_of_noun_i_is_shape_i_mod_7_mark_i_mod_4_colour_i_div_4():
    nouns = [f"n{chr(97 + i)}" for i in range(16)]
    ids = noun_identities(nouns)
    assert ids["na"] == ("circle", "stripes", "black")
    assert ids["nf"] == ("star", "dot", "white")  # i = 5
    assert ids["nj"] == ("triangle", "dot", "cyan")  # i = 9
    assert ids["np"] == ("square", "checks", "magenta")  # i = 15
    assert len(noun_identities(nouns[:3])) == 3


def test_scenes_hold_one_to_max_objects_with_every_attribute_drawn():
    params = replace(TINY, max_objects=3)
    scenes = [s for s, _, _ in _scenes(params, 300)]
    assert {len(s.objects) for s in scenes} == {1, 2, 3}
    objs = [o for s in scenes for o in s.objects]
    assert {o[1] for o in objs} == set(COLOURS) and {o[2] for o in objs} == {"small", "big"}
    assert {o[3] for o in objs} == {"left", "middle", "right", "top", "bottom"}
    assert {len(s.objects) for s, _, _ in _scenes(replace(TINY, max_objects=1), 50)} == {1}
