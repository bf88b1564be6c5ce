import hashlib
import json
import random
import re
from dataclasses import replace
from itertools import combinations
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from emergence.core.io import PipelineError
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.scenes import (
    COLOURS,
    COUNTS,
    MARK_COLOURS,
    MARKS,
    SHAPES,
    Scene,
    SceneParams,
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
    with pytest.raises(PipelineError, match="distinct visual identities"):
        noun_identities(CDI_NOUNS[: len(MARKS) * len(MARK_COLOURS) + 1])


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
    assert len(gt_positions) > 1  # the true answer is not always in the same slot
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
