"""reports/grounding_visual.html: grounding in visual dialogue, caption and image settings."""
from __future__ import annotations

import pandas as pd

from emergence.report import html as H
from emergence.report.grounding import curves_figure, final_table, gain_by_checkpoint

FINAL_COLUMNS = ["model", "step", "n_seeds", "n_words", "s_matched", "s_mismatched", "G", "G_seed_min",
                 "G_seed_max", "p_value", "grounded (G > 0, p < 0.01)"]


def visual_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """gain_by_checkpoint with one curve per (setting, model), labelled 'setting / model'."""
    labelled = rows.assign(model=rows["setting"] + " / " + rows["model"])
    return gain_by_checkpoint(labelled)


def visual_metrics(curve: pd.DataFrame) -> dict:
    return {r.model.replace(" / ", "_"): {"step": int(r.step), "G": round(float(r.G), 5), "p_value": round(float(r.p_value), 5)}
            for r in final_table(curve).itertuples()}


def _data_section(counts: dict, targets: pd.DataFrame, eval_set: pd.DataFrame, encoder: dict) -> str:
    summary = pd.DataFrame(sorted((k, str(v)) for k, v in counts.items()), columns=["quantity", "value"])
    enc = pd.DataFrame(sorted((k, str(v)) for k, v in encoder.items()), columns=["field", "value"])
    warning = [] if encoder.get("pretrained") else [
        H.para("Encoder not pretrained: the image features come from a randomly initialised DINOv2 of the "
               "same shape (no local weights). The image setting measures what a fixed random encoder "
               "preserves, not what DINOv2 sees.", "note")]
    return "\n".join([
        H.table(summary, caption="Dialogs read (visdial_extract)"),
        H.table(targets, caption="Target nouns: caption (w<ENV>) and dialogue (w<LAN>) occurrences"),
        H.para(f"{len(eval_set)} held-out dialogs cut before the first v<LAN> whose caption names v. Caption "
               "setting: mismatched contexts swap the caption's v<ENV> for other targets' u<ENV>. Image "
               "setting: the caption is removed and the dialogue is read after its own image, or after "
               "images whose captions do not name v."),
        *warning,
        H.table(enc, caption="Image encoder (dino_features)"),
    ])


def _gain_section(curve: pd.DataFrame) -> str:
    return "\n".join([
        H.para("G(v): mean over contexts and mismatches of s(v<LAN> | mismatched) - s(v<LAN> | matched); "
               "p: one-sided sign-flip test over words of G(v) > 0, G(v) averaged over seeds."),
        H.figure(curves_figure(curve), "surprisal and grounding gain over training per setting"),
        H.table(final_table(curve)[FINAL_COLUMNS], caption="Final checkpoint", float_format="{:.4f}"),
        "<details><summary>Every checkpoint</summary>" +
        H.table(curve.drop(columns=["n_seeds", "n_words"]), float_format="{:.4f}") + "</details>",
    ])


def visual_page(counts: dict, targets: pd.DataFrame, eval_set: pd.DataFrame, encoder: dict, curve: pd.DataFrame,
                provenance: dict) -> str:
    sections = [
        ("Data and encoder", _data_section(counts, targets, eval_set, encoder)),
        ("Grounding gain over training", _gain_section(curve)),
        ("Provenance", H.provenance_block(provenance)),
    ]
    intro = ("Visual Dialog-style dialogues: a caption (w<ENV>) or the image itself (DINOv2 patch features read "
             "as a prefix) is the environment, the question/answer turns are speech (w<LAN>). Grounded: the "
             "matched environment makes v<LAN> less surprising (Wu et al., arXiv 2510.13796). Saliency, heads "
             "and ablation for these settings are not built yet.")
    return H.page("Symbol grounding in visual dialogue", sections, intro=intro)
