"""Visual Dialog files read into dialogs: the real val file's counts and first dialog, word splitting and
token order, a tiny file's rows, every shape and file error as one line naming where it is; and where the
dialog file and the images are found."""

import copy
import json

import numpy as np
import pytest
from refusals import refuses

from emergence.studies.grounding.visdial import (
    ANSWERER,
    QUESTIONER,
    dialog_tokens,
    extract_dialogs,
    find_images,
    load_visdial,
    visdial_counts,
    visdial_file,
    words,
)

pytestmark = pytest.mark.usefixtures("one_thread")

VAL = "visdial/visdial_1.0_val_crowdsourced.json"
TINY = {
    "version": "1.0",
    "split": "test2018",
    "data": {
        "questions": ["What colour is the DOG?", "is it's tail long", "anything else"],
        "answers": ["brown, mostly", "yes", "no"],
        "dialogs": [
            {
                "image_id": 7,
                "caption": "A dog, on the grass.",
                "dialog": [
                    {"question": 0, "answer": 0, "answer_options": [2, 0, 1], "gt_index": 1},
                    {"question": 1, "answer": 1, "answer_options": [1, 2], "gt_index": 0},
                ],
            },
            {
                "image_id": 9,
                "caption": "two cats",
                "dialog": [{"question": 2, "answer": 2}, {"question": 1, "answer_options": [0, 1, 2]}],
            },  # test split: question only
        ],
    },
}


def write(tmp_path, obj, name="tiny.json"):
    path = tmp_path / name
    path.write_text(json.dumps(obj))
    return path


def broken(**edits):
    """TINY with dialog 1 (image_id 9), round 0 edited; a value None deletes the key."""
    obj = copy.deepcopy(TINY)
    target = obj["data"]["dialogs"][1]["dialog"][0]
    for key, value in edits.items():
        if value is None:
            del target[key]
        else:
            target[key] = value
    return obj


@pytest.fixture(scope="module")
def val(shared_data):
    return extract_dialogs(shared_data / VAL)


def test_real_val_file_counts(shared_data, val):
    counts = visdial_counts(shared_data / VAL, val)
    assert {k: counts[k] for k in ("dialogs", "questions", "answers", "rounds", "split")} == {
        "dialogs": 97,
        "questions": 45237,
        "answers": 34821,
        "rounds": 970,
        "split": "val2018",
    }
    assert (val["n_rounds"] == 10).all() and val["dialog"].tolist() == list(range(97))
    assert counts["env_tokens"] == val["env"].map(len).sum() > 0
    assert counts["lan_tokens"] == val["lan"].map(len).sum() > counts["env_tokens"]
    assert set(val["file"]) == {str(shared_data / VAL)}
    assert val["image_id"].dtype == "int64" and val["image_id"].is_unique


def test_real_val_first_dialog_starts_with_its_caption(shared_data, val):
    raw = json.loads((shared_data / VAL).read_text())["data"]
    first, row = raw["dialogs"][0], val.iloc[0]
    caption = [w + "<ENV>" for w in words(first["caption"])]
    assert (row.image_id, row.caption) == (first["image_id"], first["caption"])
    assert row.env == caption and row.tokens[: len(caption) + 1] == caption + [QUESTIONER]
    q0 = [w + "<LAN>" for w in words(raw["questions"][first["dialog"][0]["question"]])]
    a0 = [w + "<LAN>" for w in words(raw["answers"][first["dialog"][0]["answer"]])]
    assert row.tokens[len(caption) + 1 :][: len(q0) + len(a0) + 1] == q0 + [ANSWERER] + a0
    assert row.tokens.count(QUESTIONER) == row.tokens.count(ANSWERER) == 10
    assert row.lan == [t for t in row.tokens if t.endswith("<LAN>")]


def test_words_split_on_non_word_characters():
    assert words("It's a RED, red-ish ball!") == ["it's", "a", "red", "red", "ish", "ball"]
    assert words("don\u2019t say 'crime' ") == ["don't", "say", "crime"]  # curly apostrophe, quotes
    assert words("a teddy_bear") == ["a", "teddy_bear"]  # synthetic scenes' one-word nouns
    assert words(" ,. ") == []


def test_token_order():
    tokens = dialog_tokens("The dog.", [("is it big?", "yes, very"), ("where", None)])
    assert tokens == [
        "the<ENV>",
        "dog<ENV>",
        "<Q>",
        "is<LAN>",
        "it<LAN>",
        "big<LAN>",
        "<A>",
        "yes<LAN>",
        "very<LAN>",
        "<Q>",
        "where<LAN>",
    ]


def test_tiny_file_rows(tmp_path):
    path = write(tmp_path, TINY)
    df = extract_dialogs(path)
    assert df.columns.tolist() == ["file", "dialog", "image_id", "caption", "n_rounds", "env", "lan", "tokens"]
    assert df["file"].tolist() == [str(path)] * 2 and df["image_id"].tolist() == [7, 9]
    assert df["n_rounds"].tolist() == [2, 2]
    dog, cats = df.to_dict("records")
    assert dog["env"] == ["a<ENV>", "dog<ENV>", "on<ENV>", "the<ENV>", "grass<ENV>"]
    assert dog["tokens"] == dog["env"] + [
        "<Q>",
        "what<LAN>",
        "colour<LAN>",
        "is<LAN>",
        "the<LAN>",
        "dog<LAN>",
        "<A>",
        "brown<LAN>",
        "mostly<LAN>",
        "<Q>",
        "is<LAN>",
        "it's<LAN>",
        "tail<LAN>",
        "long<LAN>",
        "<A>",
        "yes<LAN>",
    ]
    # the second round has no answer: its question closes the dialog, no <A>
    assert cats["tokens"] == [
        "two<ENV>",
        "cats<ENV>",
        "<Q>",
        "anything<LAN>",
        "else<LAN>",
        "<A>",
        "no<LAN>",
        "<Q>",
        "is<LAN>",
        "it's<LAN>",
        "tail<LAN>",
        "long<LAN>",
    ]
    assert cats["lan"] == ["anything<LAN>", "else<LAN>", "no<LAN>", "is<LAN>", "it's<LAN>", "tail<LAN>", "long<LAN>"]
    counts = visdial_counts(path, df)
    assert counts == {
        "dialogs": 2,
        "questions": 3,
        "answers": 3,
        "rounds": 4,
        "env_tokens": 7,
        "lan_tokens": 19,
        "split": "test2018",
    }


WHERE = ("tiny.json", "dialog 1", "(image_id 9)", "round 0")


@pytest.mark.parametrize(
    "obj, named",
    [
        (broken(question=None), ["missing", "'question'"]),
        (broken(question=3), ["question index 3", "(3 questions)"]),
        (broken(question="0"), ["question index", "got '0'"]),
        (broken(answer=40000), ["answer index 40000", "(3 answers)"]),
        (broken(answer=-1), ["answer index -1", "(3 answers)"]),
        (broken(answer=True), ["answer index", "got True"]),
        (broken(answer_options=[0, 5]), ["answer_options[1] 5", "(3 answers)"]),
        (broken(answer_options=[0, 1, 3]), ["answer_options[2] 3", "(3 answers)"]),
        (broken(answer_options="0 1"), ["answer_options", "list", "got str"]),
        (broken(answer_options=[0, 1], gt_index=2), ["gt_index 2", "answer_options", "(2 options)"]),
        (broken(gt_index=0), ["gt_index 0", "answer_options", "(0 options)"]),
    ],
)
def test_bad_rounds_name_file_dialog_image_and_round(tmp_path, obj, named):
    path = write(tmp_path, obj)
    with refuses(*WHERE, *named):
        load_visdial(path)
    with refuses(*WHERE, *named):
        extract_dialogs(path)


def test_a_round_that_is_not_an_object_is_named(tmp_path):
    obj = copy.deepcopy(TINY)
    obj["data"]["dialogs"][1]["dialog"][0] = [0, 1]
    with refuses(*WHERE, "JSON object", "got list"):
        extract_dialogs(write(tmp_path, obj))


@pytest.mark.parametrize("key", ["caption", "dialog"])
def test_dialog_missing_key_names_dialog_and_image(tmp_path, key):
    obj = copy.deepcopy(TINY)
    del obj["data"]["dialogs"][1][key]
    with refuses("tiny.json", "dialog 1", "(image_id 9)", "missing", f"'{key}'"):
        extract_dialogs(write(tmp_path, obj))


def test_dialog_missing_image_id(tmp_path):
    obj = copy.deepcopy(TINY)
    del obj["data"]["dialogs"][0]["image_id"]
    with refuses("tiny.json", "dialog 0", "(image_id missing)", "'image_id'"):
        extract_dialogs(write(tmp_path, obj))


@pytest.mark.parametrize(
    "drop, key", [("data", "'data'"), *((k, f"'data.{k}'") for k in ("questions", "answers", "dialogs"))]
)
def test_missing_top_level_keys(tmp_path, drop, key):
    obj = copy.deepcopy(TINY)
    del (obj if drop == "data" else obj["data"])[drop]
    with refuses("tiny.json", "missing", key):
        extract_dialogs(write(tmp_path, obj))


def test_unreadable_files_are_named(tmp_path):
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"data": {"questions": [}')
    with refuses(bad_json, "line 1 column 25", "JSON"):
        extract_dialogs(bad_json)
    latin1 = tmp_path / "latin1.json"
    latin1.write_bytes(b'{"version": "1.0",\n"split": "caf\xe9"}')  # latin-1 e-acute on line 2
    with refuses(latin1, "line 2", "UTF-8", "0xe9"):
        extract_dialogs(latin1)
    with refuses(tmp_path / "nope.json", "not found"):
        extract_dialogs(tmp_path / "nope.json")
    with refuses(tmp_path / "list.json", "top level", "got list"):
        extract_dialogs(write(tmp_path, [TINY], "list.json"))


def test_counts_refuse_a_table_of_another_file(tmp_path):
    df = extract_dialogs(write(tmp_path, TINY))
    with refuses(tmp_path / "tiny.json", "1 dialogs", "file 2"):
        visdial_counts(tmp_path / "tiny.json", df.iloc[:1])


def _edited(edit):
    obj = copy.deepcopy(TINY)
    edit(obj["data"])
    return obj


D1 = ("dialog 1", "(image_id 9)")


@pytest.mark.parametrize(
    "edit, named",
    [
        (lambda d: d.update(questions="q"), ["data.questions", "list", "got str"]),
        (lambda d: d["answers"].__setitem__(1, 5), ["data.answers[1]", "string", "got 5"]),
        (lambda d: d["questions"].__setitem__(2, None), ["data.questions[2]", "string", "got None"]),
        (lambda d: d.update(dialogs=[]), ["no dialogs"]),
        (lambda d: d["dialogs"].__setitem__(1, "x"), ["dialog 1", "JSON object", "got str"]),
        (lambda d: d["dialogs"][1].update(caption=3), [*D1, "caption", "string", "got int"]),
        (lambda d: d["dialogs"][1].update(dialog={}), [*D1, "list of rounds", "got dict"]),
        (lambda d: d["dialogs"][1]["dialog"][1].update(gt_index="1"), [*D1, "round 1", "gt_index", "got '1'"]),
        (
            lambda d: d["dialogs"][1].update(image_id=-1),
            ["dialog 1", "(image_id -1)", "[0, 10^12)", "12 digits", "got -1"],
        ),
    ],
)
def test_every_shape_error_is_one_whole_line(tmp_path, edit, named):
    with refuses(*named) as e:
        load_visdial(write(tmp_path, _edited(edit)))
    assert str(e.value).startswith(f"{tmp_path / 'tiny.json'}: "), str(e.value)


def test_data_that_is_not_an_object_and_image_id_zero(tmp_path):
    obj = copy.deepcopy(TINY)
    obj["data"] = [1]
    with refuses(tmp_path / "tiny.json", "'data'", "JSON object", "got list"):
        load_visdial(write(tmp_path, obj))
    zero = _edited(lambda d: d["dialogs"][0].update(image_id=0))  # the lowest id is an id
    assert load_visdial(write(tmp_path, zero))["data"]["dialogs"][0]["image_id"] == 0


def test_file_level_errors_name_the_line_and_a_bom_is_read_past(tmp_path):
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with refuses(folder, "Is a directory"):
        load_visdial(folder)
    # the bad byte on line 3 of 5, after a leading blank line: lines count from the file's start to it
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'\n{"version": "1.0",\n"split": "caf\xe9",\n"x": 1,\n"y": 2}\n')
    with refuses(bad, "line 3", "UTF-8", "0xe9"):
        load_visdial(bad)
    bom = tmp_path / "bom.json"
    bom.write_bytes(b"\xef\xbb\xbf" + json.dumps(TINY).encode())
    assert load_visdial(bom) == TINY


# ---- image files and the dialog file


def test_find_images_by_their_twelve_digit_id(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in [
        "000000000007.png",
        "sub/COCO_val2014_000000000007.jpg",  # a second file of image 7: the first in path order wins
        "sub/VisualDialog_val2018_000000000123.JPG",
        "000000000042.txt",  # not an image
        "00000000009.jpg",  # 11 digits
        "x000000000005.jpeg",
    ]:
        (tmp_path / name).write_bytes(b"")
    found = find_images(tmp_path, np.array([7, 123, 42, 9, 5]))
    assert found == [
        tmp_path / "000000000007.png",
        tmp_path / "sub/VisualDialog_val2018_000000000123.JPG",
        None,
        None,
        tmp_path / "x000000000005.jpeg",
    ]
    with refuses(f"{tmp_path / 'nope'}: ", "not found"):
        find_images(tmp_path / "nope", [7])


def test_visdial_file_is_the_file_or_the_one_json_in_a_folder(tmp_path):
    assert visdial_file(tmp_path / "v.json") == tmp_path / "v.json"
    with refuses(f"{tmp_path}: ", ".json", "found 0"):
        visdial_file(tmp_path)
    (tmp_path / "scenes.json").write_text("{}")
    (tmp_path / "notes.txt").write_text("")
    assert visdial_file(tmp_path) == tmp_path / "scenes.json"
    (tmp_path / "more.json").write_text("{}")
    with refuses(f"{tmp_path}: ", ".json", "found 2"):
        visdial_file(tmp_path)
