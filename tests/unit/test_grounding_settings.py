"""The grounding settings: run names, key columns and the params/paths keys each setting reads."""

from __future__ import annotations

import pytest
import yaml
from conftest import ROOT
from refusals import refuses

from emergence.studies.grounding.settings import Corpus, Setting

PARAMS = yaml.safe_load((ROOT / "params.yaml").read_text())


@pytest.mark.parametrize(
    "setting, run, keys",
    [
        ("childes", "t4_seed1", {"model": "t4", "seed": 1}),  # text runs keep their names from before settings
        ("caption", "caption_t4_seed1", {"setting": "caption", "model": "t4", "seed": 1}),
        ("image", "image_t4_seed1", {"setting": "image", "model": "t4", "seed": 1}),
    ],
)
def test_run_names_and_key_columns(setting, run, keys):
    s = Setting(setting)
    assert s.run("t4", 1) == run and s.keys("t4", 1) == keys
    assert list(s.key_columns) == list(keys)


@pytest.mark.parametrize("setting, study", [("childes", "grounding"), ("caption", "visual"), ("image", "visual")])
def test_each_setting_reads_its_own_sections_and_paths(setting, study):
    s = Setting(setting)
    for what in ("vocab", "eval", "runs", "gain", "saliency", "heads", "ablation", "scratch"):
        assert s.key(what) == f"{study}_{what}" and s.key(what) in PARAMS["paths"]
    for what in ("vocab", "eval", "train", "saliency", "heads", "ablation"):
        assert s.key(what) in PARAMS
    assert s.corpus.table_key in PARAMS["paths"]


def test_caption_and_image_share_one_corpus():
    assert Setting("caption").corpus == Setting("image").corpus == Corpus("visdial")
    assert Setting("childes").corpus == Corpus("childes")


def test_bad_names_are_refused_naming_the_option():
    with refuses("--setting: ", "'audio'", "['childes', 'caption', 'image']"):
        Setting("audio")
    with refuses("--corpus: ", "'coco'", "['childes', 'visdial']"):
        Corpus("coco")
    with refuses("--model: ", "'t_4'", "lower-case"):
        Setting("childes").run("t_4", 1)
