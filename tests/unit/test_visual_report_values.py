"""reports/grounding_visual.html by value: the data and encoder section, the page's sections and its
data-source line, each traced to hand-built inputs."""

from __future__ import annotations

import pandas as pd
from test_grounding_report_values import candidates, curve_frame, details, paras, sections, table

from emergence.studies.grounding import report_visual as V

SOURCE = "captions (v<ENV>) and dialogue (v<LAN>)"


def eval_frame() -> pd.DataFrame:
    return pd.DataFrame({"word": ["dog", "dog", "cat"], "context": [["a"], ["b"], ["c"]]})


def test_data_section_counts_encoder_and_targets():
    counts = {"split": "val", "dialogs": 12, "captions": 9}
    encoder = {"pretrained": True, "name": "dinov2_small", "d": 384}
    part = V._data_section(counts, candidates(), eval_frame(), encoder)
    assert table(part, "Dialogs read (visdial_extract)").values.tolist() == [
        ["captions", "9"], ["dialogs", "12"], ["split", "val"]
    ]  # fmt: skip
    assert table(part, "Image encoder (dino_features)").values.tolist() == [
        ["d", "384"], ["name", "dinov2_small"], ["pretrained", "True"]
    ]  # fmt: skip
    text = paras(part)
    assert text[0].startswith(
        f"Targets: 4 of the 5 candidate nouns have both forms at least min_count times in the {SOURCE};"
    )
    assert table(part, f"Target nouns: occurrences of each form in the {SOURCE}")["word"].tolist() == ["dog", "cat"]
    assert text[1].startswith("3 held-out dialogs cut before the first v<LAN>")
    assert len(text) == 2 and "not pretrained" not in part


def test_data_section_notes_a_random_encoder():
    for encoder in ({"pretrained": False, "name": "x"}, {"name": "x"}):
        part = V._data_section({"split": "synthetic"}, candidates(), eval_frame(), encoder)
        assert paras(part)[2].startswith("Encoder not pretrained: the image features come from a randomly initialised")
        assert '<p class="note">Encoder not pretrained' in part


def page_inputs(split: str) -> dict:
    return dict(
        counts={"split": split, "dialogs": 4},
        targets=candidates(),
        eval_set=eval_frame(),
        encoder={"pretrained": True},
        curve=curve_frame().assign(model=lambda d: "caption / " + d["model"]),
        mechanisms=[("Head ablation", "<p>ablated</p>")],
        provenance={"git_revision": "def456", "seeds": [3], "data_hashes": {"f": "00"}, "params": {}},
    )


def test_visual_page_sections_gain_by_setting_and_data_source(figures):  # noqa: F811
    page = V.visual_page(**page_inputs("val"))
    s = sections(page)
    assert list(s) == ["Data and encoder", "Grounding gain over training", "Head ablation", "Provenance"]
    assert table(s["Data and encoder"], "Dialogs read (visdial_extract)").values.tolist() == [
        ["dialogs", "4"], ["split", "val"]
    ]  # fmt: skip
    gain = s["Grounding gain over training"]
    assert paras(gain)[0].startswith(V.VISUAL_GAIN + "; p: one-sided sign-flip test")
    assert figures[0][1] == "surprisal and grounding gain over training per setting"
    final = table(gain, "Final checkpoint")
    assert final[["model", "step", "G", "grounded (G > 0, p < 0.01)"]].values.tolist() == [
        ["caption / lstm", "300", "0.0123", "no"], ["caption / tf", "200", "0.5309", "yes"]
    ]  # fmt: skip
    assert len(table(details(gain, "Every checkpoint"), None)) == 6
    assert s["Head ablation"] == "<p>ablated</p>"
    assert "Seeds: 3" in s["Provenance"]
    intro = paras(page.split("<nav>")[0])[0]
    assert intro.startswith("Data: Visual Dialog file of split 'val'. Visual Dialog-style dialogues: a caption")


def test_visual_page_says_when_the_data_are_synthetic(figures):  # noqa: F811
    intro = paras(V.visual_page(**page_inputs("synthetic")).split("<nav>")[0])[0]
    assert intro.startswith("Data: synthetic scenes in Visual Dialog v1.0 format (the embedded default)")
    assert "for the paper's data. Visual Dialog-style dialogues" in intro
    train = paras(V.visual_page(**page_inputs("train")).split("<nav>")[0])[0]
    assert train.startswith("Data: Visual Dialog file of split 'train'. Visual Dialog-style")
