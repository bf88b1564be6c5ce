"""Visual Dialog v1.0 dialogues as grounded token streams (study G's visual-dialogue extension).

A VisDial file pools its text: `data.questions` and `data.answers` are lists
of strings and each round of a dialog points into them by index. One dialog
becomes one token stream, the caption standing in for the image:

    caption words as w<ENV>   <Q> question as w<LAN>   <A> answer as w<LAN>   <Q> ...

Test-split rounds may have no answer (the last round asks only); such a round
has no <A> part. The whole file is validated before any row is built, so a
stage writes nothing for a bad file. Dialogs and rounds are named by their
0-based position in the JSON lists (`jq '.data.dialogs[3].dialog[2]'`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from emergence.core.io import PipelineError
from emergence.studies.grounding.tokens import env, lan

QUESTIONER, ANSWERER = "<Q>", "<A>"
COLUMNS = ["file", "dialog", "image_id", "caption", "n_rounds", "env", "lan", "tokens"]
POOLS = ("questions", "answers", "dialogs")
# word characters are letters, digits, '_' (synthetic scenes keep teddy_bear one word) and
# the apostrophe ("it's"); everything else separates words
_SEPARATORS = re.compile(r"[^\w']+")
IMAGE_ID_RE = re.compile(r"(\d{12})$")
MAX_IMAGE_ID = 10**12  # ids are written as 12 zero-padded digits in image file names
IMAGE_SUFFIXES = {".jpg", ".jpeg", ".png"}


# --- reading ---------------------------------------------------------------


def _parse(path: Path) -> object:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise PipelineError(f"{path}: VisDial file not found") from None
    except OSError as e:
        raise PipelineError(f"{path}: not readable ({e.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        raise PipelineError(f"{path}: line {line}: not UTF-8 (byte {data[e.start]:#04x})") from None
    try:
        return json.loads(text.removeprefix("\ufeff"))
    except json.JSONDecodeError as e:
        raise PipelineError(f"{path}: line {e.lineno} column {e.colno}: not valid JSON ({e.msg})") from None


def load_visdial(path: str | os.PathLike) -> dict:
    """The parsed file ({"version", "split", "data": {...}}), checked by validate_dialogs."""
    raw = _parse(Path(path))
    if not isinstance(raw, dict):
        raise PipelineError(f"{path}: top level must be a JSON object, got {type(raw).__name__}")
    if "data" not in raw:
        raise PipelineError(f"{path}: missing top-level key 'data'")
    validate_dialogs(raw["data"], path)
    return raw


# --- validation ------------------------------------------------------------


def _is_index(value: object) -> bool:
    return type(value) is int  # bool is an int subclass but never an index


def _check_index(value: object, pool: int, what: str, noun: str, where: str) -> None:
    if not _is_index(value):
        raise PipelineError(f"{where}: {what} must be an integer, got {value!r}")
    if not 0 <= value < pool:
        raise PipelineError(f"{where}: {what} {value} out of range ({pool} {noun})")


def _check_options(options: object, n_answers: int, where: str) -> None:
    if not isinstance(options, list):
        raise PipelineError(f"{where}: answer_options must be a list, got {type(options).__name__}")
    # 100 options a round: find the bad one fast, then let _check_index say what is wrong with it
    bad = next((k for k, o in enumerate(options) if not (_is_index(o) and 0 <= o < n_answers)), None)
    if bad is not None:
        _check_index(options[bad], n_answers, f"answer_options[{bad}]", "answers", where)


def _check_round(r: object, n_questions: int, n_answers: int, where: str) -> None:
    if not isinstance(r, dict):
        raise PipelineError(f"{where}: a round must be a JSON object, got {type(r).__name__}")
    if "question" not in r:
        raise PipelineError(f"{where}: missing key 'question'")
    _check_index(r["question"], n_questions, "question index", "questions", where)
    if "answer" in r:  # absent on the test split's open rounds
        _check_index(r["answer"], n_answers, "answer index", "answers", where)
    options = r.get("answer_options")
    if options is not None:
        _check_options(options, n_answers, where)
    if "gt_index" in r:
        gt = r["gt_index"]
        if not _is_index(gt):
            raise PipelineError(f"{where}: gt_index must be an integer, got {gt!r}")
        n_options = len(options) if options is not None else 0
        if not 0 <= gt < n_options:
            raise PipelineError(f"{where}: gt_index {gt} outside answer_options ({n_options} options)")


def _check_dialog(d: object, n_questions: int, n_answers: int, where: str) -> None:
    if not isinstance(d, dict):
        raise PipelineError(f"{where}: a dialog must be a JSON object, got {type(d).__name__}")
    where = f"{where} (image_id {d.get('image_id', 'missing')})"
    for key in ("image_id", "caption", "dialog"):
        if key not in d:
            raise PipelineError(f"{where}: missing key '{key}'")
    if not _is_index(d["image_id"]) or not 0 <= d["image_id"] < MAX_IMAGE_ID:
        raise PipelineError(
            f"{where}: image_id must be an integer in [0, 10^12) (image files carry 12 digits), got {d['image_id']!r}"
        )
    if not isinstance(d["caption"], str):
        raise PipelineError(f"{where}: caption must be a string, got {type(d['caption']).__name__}")
    if not isinstance(d["dialog"], list):
        raise PipelineError(f"{where}: dialog must be a list of rounds, got {type(d['dialog']).__name__}")
    for j, r in enumerate(d["dialog"]):
        _check_round(r, n_questions, n_answers, f"{where}: round {j}")


def validate_dialogs(data: dict, path: str | os.PathLike) -> None:
    """Check a file's `data` section; one-line PipelineError naming file, dialog, image_id and round."""
    if not isinstance(data, dict):
        raise PipelineError(f"{path}: 'data' must be a JSON object, got {type(data).__name__}")
    for key in POOLS:
        if key not in data:
            raise PipelineError(f"{path}: missing key 'data.{key}'")
        if not isinstance(data[key], list):
            raise PipelineError(f"{path}: data.{key} must be a list, got {type(data[key]).__name__}")
    for key in ("questions", "answers"):
        bad = next((i for i, s in enumerate(data[key]) if not isinstance(s, str)), None)
        if bad is not None:
            raise PipelineError(f"{path}: data.{key}[{bad}] must be a string, got {data[key][bad]!r}")
    if not data["dialogs"]:
        raise PipelineError(f"{path}: no dialogs, nothing to extract")
    n_questions, n_answers = len(data["questions"]), len(data["answers"])
    for i, d in enumerate(data["dialogs"]):
        _check_dialog(d, n_questions, n_answers, f"{path}: dialog {i}")


# --- tokens ----------------------------------------------------------------


def words(text: str) -> list[str]:
    """Lower-cased words; quote marks around a word ('crime') are not part of it."""
    text = text.lower().replace("\u2019", "'")  # typographic apostrophe: don’t == don't
    return [w for w in (part.strip("'") for part in _SEPARATORS.split(text)) if w]


def dialog_tokens(caption: str, rounds: list[tuple[str, str | None]]) -> list[str]:
    """Caption words as w<ENV>, then per round <Q> question w<LAN>, <A> answer w<LAN> (no <A> if None)."""
    tokens = [env(w) for w in words(caption)]
    for question, answer in rounds:
        tokens += [QUESTIONER] + [lan(w) for w in words(question)]
        if answer is not None:
            tokens += [ANSWERER] + [lan(w) for w in words(answer)]
    return tokens


def _rounds(d: dict, questions: list[str], answers: list[str]) -> list[tuple[str, str | None]]:
    return [(questions[r["question"]], answers[r["answer"]] if "answer" in r else None) for r in d["dialog"]]


def extract_dialogs(path: str | os.PathLike) -> pd.DataFrame:
    """One row per dialog of a VisDial v1.0 JSON file.

    Columns: file (path as given), dialog (0-based position in the file),
    image_id, caption, n_rounds, env (the caption's w<ENV> tokens), lan (every
    w<LAN> token, in order) and tokens (dialog_tokens: the model's view).
    """
    data = load_visdial(path)["data"]
    rows = []
    for i, d in enumerate(data["dialogs"]):
        tokens = dialog_tokens(d["caption"], _rounds(d, data["questions"], data["answers"]))
        n_env = len(words(d["caption"]))
        speech = [t for t in tokens[n_env:] if t not in (QUESTIONER, ANSWERER)]
        rows.append((str(path), i, d["image_id"], d["caption"], len(d["dialog"]), tokens[:n_env], speech, tokens))
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"dialog": "int64", "image_id": "int64", "n_rounds": "int64"})


def visdial_counts(path: str | os.PathLike, table: pd.DataFrame) -> dict:
    """Sizes of the file (dialogs, question/answer pools, split) and of its extracted table."""
    raw = load_visdial(path)
    data = raw["data"]
    if len(table) != len(data["dialogs"]):
        raise PipelineError(f"{path}: the table has {len(table)} dialogs, the file {len(data['dialogs'])}")
    return {
        "dialogs": len(table),
        "questions": len(data["questions"]),
        "answers": len(data["answers"]),
        "rounds": int(table["n_rounds"].sum()),
        "env_tokens": int(table["env"].map(len).sum()),
        "lan_tokens": int(table["lan"].map(len).sum()),
        "split": raw.get("split"),
    }


def find_images(images_dir: str | os.PathLike, image_ids: Sequence[int]) -> list[Path | None]:
    """The file of each image id in a COCO/VisDial image directory (searched recursively), None when absent.

    Names end in the zero-padded 12-digit id (`COCO_val2014_000000123456.jpg`,
    `VisualDialog_val2018_000000123456.jpg`, or the synthetic `000000000007.png`).
    """
    images_dir = Path(images_dir)
    if not images_dir.is_dir():
        raise PipelineError(f"{images_dir}: image directory not found")
    by_id: dict[int, Path] = {}
    for path in sorted(images_dir.rglob("*")):
        match = IMAGE_ID_RE.search(path.stem)
        if match and path.suffix.lower() in IMAGE_SUFFIXES:
            by_id.setdefault(int(match.group(1)), path)
    return [by_id.get(int(i)) for i in image_ids]


def visdial_file(source: str | os.PathLike) -> Path:
    """A VisDial JSON file, or the one *.json file directly inside a directory (the synthetic scenes')."""
    source = Path(source)
    if not source.is_dir():
        return source
    found = sorted(source.glob("*.json"))
    if len(found) != 1:
        raise PipelineError(f"{source}: expected one VisDial .json file in the directory, found {len(found)}")
    return found[0]
