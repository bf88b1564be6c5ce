"""reports/grounding_visual.html and its metrics by value: curves and tables labelled 'setting / model',
the metrics' rounding and keys, the mechanistic sections' own sentences (both image baselines) around the
text study's sections, the data and encoder section, and the page's title, intro (its data source),
sections and their bodies, each traced to hand-built inputs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from test_grounding_mech_report import ablation_frame, heads_inputs, layout, saliency_frame
from test_grounding_report import (
    candidates,
    curve_frame,
    details,
    gain_rows,
    paras,
    sections,
    table,
)

from emergence.core.report import html as H
from emergence.studies.grounding import report as R
from emergence.studies.grounding import report_mech as M
from emergence.studies.grounding import report_visual as V
from emergence.studies.grounding.gain import sign_flip_test

# ---- labels, curves, metrics


def test_labelled_names_each_row_setting_slash_model_and_keeps_the_rest():
    rows = pd.DataFrame({"setting": ["caption", "image", "image"], "model": ["t4", "t4", "t2"], "x": [1, 2, 3]})
    got = V.labelled(rows)
    assert got.values.tolist() == [
        ["caption", "caption / t4", 1],
        ["image", "image / t4", 2],
        ["image", "image / t2", 3],
    ]
    assert list(got.columns) == ["setting", "model", "x"] and rows["model"].tolist() == ["t4", "t4", "t2"]


def test_visual_curve_one_curve_per_setting_and_model():
    rows = pd.concat(
        [
            gain_rows({("t4", 0, 10): {"a": [1.0, 3.0], "b": [0.5]}}).assign(setting="caption"),
            gain_rows({("t4", 0, 10): {"a": [-1.0], "b": [0.25]}}).assign(setting="image"),
        ]
    )
    got = V.visual_curve(rows)
    assert got["model"].tolist() == ["caption / t4", "image / t4"]
    assert got["G"].tolist() == [1.25, -0.375]  # mean over words: (2 + 0.5) / 2, (-1 + 0.25) / 2
    assert got.equals(R.gain_by_checkpoint(rows.assign(model=rows["setting"] + " / " + rows["model"])))


def test_visual_metrics_final_gain_and_last_checkpoint_ablation_per_setting_and_model():
    curve = curve_frame().assign(model=lambda d: "image / " + d["model"])
    ablation = pd.concat([ablation_frame().assign(setting="caption"), ablation_frame().query("model == 'a2'")])
    ablation["setting"] = ablation["setting"].fillna("image")
    p50 = round(sign_flip_test(np.array([0.5])), 5)
    p300 = round(sign_flip_test(np.array([0.5, -0.5, 1.0, 0.25])), 5)
    a2 = {"heads (mean)": 1.0, "original": 4.0, "intervention": 5.0, "control": 4.5, "p (intervention > control)": p50}
    assert V.visual_metrics(curve, ablation) == {
        "image_tf": {"step": 200, "G": 0.53086, "p_value": 0.00999},  # G 0.5308649, p 0.0099949: five places
        "image_lstm": {"step": 300, "G": 0.01235, "p_value": 0.01},
        "ablation": {
            "caption_a2_aggregate": a2,
            "caption_t4_aggregate": {
                "heads (mean)": 2.0,
                "original": 2.0,
                "intervention": 2.7,
                "control": 1.9375,
                "p (intervention > control)": p300,
            },
            "caption_t4_gather": {
                "heads (mean)": 0.0,
                "original": 1.625,
                "intervention": None,
                "control": None,
                "p (intervention > control)": None,
            },
            "image_a2_aggregate": a2,
        },
    }


# ---- mechanistic sections

WHERE = (
    "ENV positions: in the caption setting the caption's v<ENV> (as in the text study); in the image setting the "
    "image's prefix positions (its DINOv2 features projected into the model), the dialogue read there having no "
    "caption. An aggregate head there carries the image to the prediction of v<LAN>; a gather head mixes image "
    "positions among themselves."
)
BASELINE = (
    "The image has many positions where a caption has one or two v<ENV>, so its share is large even in an "
    "untrained model, {rule} Where (almost) every head of a layer passes, fewer random control heads are left "
    "than are ablated (control heads column) and the control is no longer matched; with none left, control and p "
    "are empty."
)
INIT_RULE = (
    "so an image-setting head counts only when its share rises above the same head's share at step 0 (random "
    "init) by 30% of what was left: (s − s0) / (1 − s0) ≥ 30% (visual_heads.image_baseline: init). The caption "
    "setting uses the share itself."
)
NONE_RULE = (
    "and image-setting heads are found by the share itself (visual_heads.image_baseline: none): read their rows "
    "against the first checkpoint (random init)."
)


def visual_tables() -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Saliency, heads and ablation rows of the text fixtures, read once per setting (the image setting
    without model a2)."""
    heads, saliency = heads_inputs()

    def both(rows):
        return pd.concat([rows.assign(setting="caption"), rows[rows["model"] != "a2"].assign(setting="image")])

    return both(pd.concat([saliency_frame(), saliency])), both(heads), both(ablation_frame())


def test_mechanism_sections_say_where_the_environment_is_and_label_each_setting(figures):  # noqa: F811
    saliency, heads, ablation = visual_tables()
    got = V.mechanism_sections(saliency, heads, ablation, 0.3, "init")
    assert [title for title, _ in got] == ["Saliency flow by layer", "Aggregate and gather heads", "Head ablation"]
    flow, found, ablated = (body for _, body in got)
    assert layout(flow)[0] == "<p>…</p>" and paras(flow)[0] == WHERE
    assert layout(found)[0] == "<p>…</p>" and paras(found)[0] == BASELINE.format(rule=INIT_RULE)
    # then the text study's sections, one panel or row per 'setting / model', positions named ENV
    alt = "saliency flow from ENV to the prediction by layer over training"
    assert [a for _, a in figures] == [alt]
    assert [ax.get_title() for ax in figures[0][0].axes] == [
        "caption / a2: saliency flow by layer",
        "caption / t4: saliency flow by layer",
        "image / t4: saliency flow by layer",
    ]
    labelled = [V.labelled(rows) for rows in (saliency, heads, ablation)]
    assert flow == H.para(WHERE) + "\n" + M.saliency_section(labelled[0], "ENV")
    text_heads = M.heads_section(labelled[1], labelled[0], 0.3, "ENV")
    assert found == H.para(BASELINE.format(rule=INIT_RULE)) + "\n" + text_heads
    assert paras(found)[1].startswith("Aggregate heads: >= 30% of a head's |saliency| on the edges ENV → prediction")
    models = table(found, "Heads found per checkpoint")["model"].tolist()
    assert list(dict.fromkeys(models)) == ["caption / a2", "caption / t4", "image / t4"]
    assert ablated == M.ablation_section(labelled[2], paper=False)
    assert table(ablated, "Last checkpoint")["model"].tolist() == [
        "caption / a2", "caption / t4", "caption / t4", "image / t4", "image / t4"
    ]  # fmt: skip
    assert "Paper (Wu et al." not in ablated


def test_mechanism_sections_without_an_image_baseline(figures):  # noqa: F811
    saliency, heads, ablation = visual_tables()
    found = dict(V.mechanism_sections(saliency, heads, ablation, 0.3, "none"))["Aggregate and gather heads"]
    assert paras(found)[0] == BASELINE.format(rule=NONE_RULE)


# ---- data and encoder section

HELD_OUT = (
    "{n} held-out dialogs cut before the first v<LAN> whose caption names v. Caption setting: mismatched contexts "
    "swap the caption's v<ENV> for other targets' u<ENV>. Image setting: the caption is removed and the dialogue "
    "is read after its own image, or after images whose captions do not name v."
)
RANDOM_ENCODER = (
    "Encoder not pretrained: the image features come from a randomly initialised DINOv2 of the same shape (no "
    "local weights). The image setting measures what a fixed random encoder preserves, not what DINOv2 sees."
)
SOURCE = "captions (v<ENV>) and dialogue (v<LAN>)"


def two_word_eval_frame() -> pd.DataFrame:
    return pd.DataFrame({"word": ["dog", "dog", "cat"], "context": [["a"], ["b"], ["c"]]})


def test_data_section_counts_encoder_and_targets():
    counts = {"split": "val", "dialogs": 12, "captions": 9}
    encoder = {"pretrained": True, "name": "dinov2_small", "d": 384}
    part = V._data_section(counts, candidates(), two_word_eval_frame(), encoder)
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
        part = V._data_section({"split": "synthetic"}, candidates(), two_word_eval_frame(), encoder)
        assert paras(part)[2].startswith("Encoder not pretrained: the image features come from a randomly initialised")
        assert '<p class="note">Encoder not pretrained' in part


def eval_frame(n: int) -> pd.DataFrame:
    return pd.DataFrame({"word": ["dog"] * n, "context": [["a"]] * n})


def test_data_section_sentences_and_tables_in_order():
    counts = {"split": "val", "dialogs": 12, "captions": None}
    encoder = {"pretrained": True, "name": "dinov2_small", "d": 384}
    part = V._data_section(counts, candidates(), eval_frame(3), encoder)
    assert layout(part) == ["<table>…</table>", "<p>…</p>", "<table>…</table>", "<p>…</p>", "<table>…</table>"]
    targets = R.targets_part(candidates(), SOURCE)
    assert part.split("\n")[1:3] == targets.split("\n")
    assert paras(part) == [paras(targets)[0], HELD_OUT.format(n=3)]
    summary = table(part, "Dialogs read (visdial_extract)")
    assert list(summary.columns) == ["quantity", "value"]
    assert summary.values.tolist() == [["captions", "None"], ["dialogs", "12"], ["split", "val"]]
    enc = table(part, "Image encoder (dino_features)")
    assert list(enc.columns) == ["field", "value"]
    assert enc.values.tolist() == [["d", "384"], ["name", "dinov2_small"], ["pretrained", "True"]]


def test_data_section_notes_an_encoder_without_pretrained_weights():
    part = V._data_section({"split": "synthetic"}, candidates(), eval_frame(1), {"pretrained": False})
    assert layout(part) == [
        "<table>…</table>", "<p>…</p>", "<table>…</table>", "<p>…</p>", "<p>…</p>", "<table>…</table>"
    ]  # fmt: skip
    assert paras(part)[1:] == [HELD_OUT.format(n=1), RANDOM_ENCODER]
    assert part.split("\n")[4] == f'<p class="note">{H.esc(RANDOM_ENCODER)}</p>'


# ---- the page

INTRO = (
    "Visual Dialog-style dialogues: a caption (its target nouns as v<ENV>; every word under env_marking: all) or "
    "the image itself (DINOv2 patch features read as a prefix) is the environment, the question/answer turns are "
    "speech (target nouns as v<LAN>). Grounded: the matched environment makes v<LAN> less surprising (Wu et al., "
    "arXiv 2510.13796); attention saliency, aggregate/gather heads and their ablation show where the environment "
    "reaches the prediction."
)
SYNTHETIC = (
    "Data: synthetic scenes in Visual Dialog v1.0 format (the embedded default), not Visual Dialog / MSCOCO; set "
    "paths.visdial_source and paths.visual_images (the paper profile does) for the paper's data. "
)


def ablation_only_page_inputs(split: str) -> dict:
    return dict(
        counts={"split": split, "dialogs": 4},
        targets=candidates(),
        eval_set=two_word_eval_frame(),
        encoder={"pretrained": True},
        curve=curve_frame().assign(model=lambda d: "caption / " + d["model"]),
        mechanisms=[("Head ablation", "<p>ablated</p>")],
        provenance={"git_revision": "def456", "seeds": [3], "data_hashes": {"f": "00"}, "params": {}},
    )


def test_visual_page_sections_gain_by_setting_and_data_source(figures):  # noqa: F811
    page = V.visual_page(**ablation_only_page_inputs("val"))
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
    intro = paras(V.visual_page(**ablation_only_page_inputs("synthetic")).split("<nav>")[0])[0]
    assert intro.startswith("Data: synthetic scenes in Visual Dialog v1.0 format (the embedded default)")
    assert "for the paper's data. Visual Dialog-style dialogues" in intro
    train = paras(V.visual_page(**ablation_only_page_inputs("train")).split("<nav>")[0])[0]
    assert train.startswith("Data: Visual Dialog file of split 'train'. Visual Dialog-style")


def page_inputs(split: str | None) -> dict:
    return dict(
        counts={"dialogs": 4} if split is None else {"split": split, "dialogs": 4},
        targets=candidates(),
        eval_set=eval_frame(2),
        encoder={"pretrained": True},
        curve=curve_frame().assign(model=lambda d: "caption / " + d["model"]),
        mechanisms=[("Saliency flow by layer", "<p>flow</p>"), ("Head ablation", "<p>ablated</p>")],
        provenance={"git_revision": "def456", "seeds": [3], "data_hashes": {"f": "00"}, "params": {"a": 1}},
    )


def test_visual_page_title_intro_and_each_sections_body(figures):  # noqa: F811
    inputs = page_inputs("val")
    page = V.visual_page(**inputs)
    title = "Symbol grounding in visual dialogue"
    assert f"<title>{title}</title>" in page and f"<h1>{title}</h1>" in page
    assert paras(page.split("<nav>")[0]) == ["Data: Visual Dialog file of split 'val'. " + INTRO]
    s = sections(page)
    assert list(s) == [
        "Data and encoder", "Grounding gain over training", "Saliency flow by layer", "Head ablation", "Provenance"
    ]  # fmt: skip
    assert s["Data and encoder"] == V._data_section(inputs["counts"], candidates(), eval_frame(2), {"pretrained": True})
    assert s["Grounding gain over training"] == R.gain_section(
        inputs["curve"], rule=V.VISUAL_GAIN, by="setting", name="visual gain"
    )
    assert [alt for _, alt in figures] == ["surprisal and grounding gain over training per setting"] * 2
    assert paras(s["Grounding gain over training"])[0] == (
        "G(v): mean over contexts and mismatches of s(v<LAN> | mismatched) - s(v<LAN> | matched); p: one-sided "
        "sign-flip test over words of G(v) > 0, G(v) averaged over seeds."
    )
    assert s["Saliency flow by layer"] == "<p>flow</p>" and s["Head ablation"] == "<p>ablated</p>"
    assert s["Provenance"] == H.provenance_block(inputs["provenance"])
    assert '<li><a href="#provenance">Provenance</a></li>' in page


def test_visual_page_intro_names_the_data_source(figures):  # noqa: F811
    def intro(split):
        return paras(V.visual_page(**page_inputs(split)).split("<nav>")[0])

    assert intro("synthetic") == [SYNTHETIC + INTRO]
    assert intro(None) == ["Data: Visual Dialog file of split None. " + INTRO]
    assert intro("train") == ["Data: Visual Dialog file of split 'train'. " + INTRO]
