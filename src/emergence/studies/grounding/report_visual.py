"""reports/grounding_visual.html: grounding in visual dialogue, caption and image settings."""

from __future__ import annotations

import pandas as pd

from emergence.core.report import html as H
from emergence.core.report.interactive import BUNDLE
from emergence.studies.grounding import report_mech as mech
from emergence.studies.grounding.report import final_table, gain_by_checkpoint, gain_section, targets_part

VISUAL_GAIN = "G(v): mean over contexts and mismatches of s(v<LAN> | mismatched) - s(v<LAN> | matched)"
ENV = "ENV"  # environment positions: the caption's v<ENV> (caption setting), the image's prefix (image setting)


def labelled(rows: pd.DataFrame) -> pd.DataFrame:
    """Per-run rows with model = 'setting / model': one curve, panel or table row per (setting, model)."""
    return rows.assign(model=rows["setting"] + " / " + rows["model"])


def visual_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """gain_by_checkpoint with one curve per (setting, model), labelled 'setting / model'."""
    return gain_by_checkpoint(labelled(rows))


def visual_metrics(curve: pd.DataFrame, ablation: pd.DataFrame) -> dict:
    """Final G and p per (setting, model), and the ablation at the last checkpoint per (setting, model, kind)."""
    gain = {
        r.model.replace(" / ", "_"): {
            "step": int(r.step),
            "G": round(float(r.G), 5),
            "p_value": round(float(r.p_value), 5),
        }
        for r in final_table(curve).itertuples()
    }
    ablated = {k.replace(" / ", "_"): v for k, v in mech.ablation_metrics(labelled(ablation)).items()}
    return {**gain, "ablation": ablated}


def mechanism_sections(
    saliency: pd.DataFrame, heads: pd.DataFrame, ablation: pd.DataFrame, threshold: float, image_baseline: str
) -> list[tuple[str, str]]:
    """The text study's saliency, heads and ablation sections, one panel or row per (setting, model)."""
    saliency, heads, ablation = labelled(saliency), labelled(heads), labelled(ablation)
    where = H.para(
        f"{ENV} positions: in the caption setting the caption's v<ENV> (as in the text study); in "
        "the image setting the image's prefix positions (its DINOv2 features projected into the "
        "model), the dialogue read there having no caption. An aggregate head there carries the image "
        "to the prediction of v<LAN>; a gather head mixes image positions among themselves."
    )
    rule = (
        f"so an image-setting head counts only when its share rises above the same head's share at step 0 "
        f"(random init) by {threshold:.0%} of what was left: (s − s0) / (1 − s0) ≥ {threshold:.0%} "
        "(visual_heads.image_baseline: init). The caption setting uses the share itself."
        if image_baseline == "init"
        else "and image-setting heads are found by the share itself (visual_heads.image_baseline: none): read "
        "their rows against the first checkpoint (random init)."
    )
    baseline = H.para(
        "The image has many positions where a caption has one or two v<ENV>, so its share is large "
        f"even in an untrained model, {rule} Where (almost) every head of a layer passes, fewer random "
        "control heads are left than are ablated (control heads column) and the control is no longer "
        "matched; with none left, control and p are empty."
    )
    return [
        ("Saliency flow by layer", where + "\n" + mech.saliency_section(saliency, ENV)),
        ("Aggregate and gather heads", baseline + "\n" + mech.heads_section(heads, saliency, threshold, ENV)),
        ("Head ablation", mech.ablation_section(ablation, paper=False)),
    ]


def _data_section(counts: dict, targets: pd.DataFrame, eval_set: pd.DataFrame, encoder: dict) -> str:
    summary = pd.DataFrame(sorted((k, str(v)) for k, v in counts.items()), columns=["quantity", "value"])
    enc = pd.DataFrame(sorted((k, str(v)) for k, v in encoder.items()), columns=["field", "value"])
    warning = (
        []
        if encoder.get("pretrained")
        else [
            H.para(
                "Encoder not pretrained: the image features come from a randomly initialised DINOv2 of the "
                "same shape (no local weights). The image setting measures what a fixed random encoder "
                "preserves, not what DINOv2 sees.",
                "note",
            )
        ]
    )
    return "\n".join(
        [
            H.table(summary, caption="Dialogs read (visdial_extract)"),
            targets_part(targets, "captions (v<ENV>) and dialogue (v<LAN>)"),
            H.para(
                f"{len(eval_set)} held-out dialogs cut before the first v<LAN> whose caption names v. Caption "
                "setting: mismatched contexts swap the caption's v<ENV> for other targets' u<ENV>. Image "
                "setting: the caption is removed and the dialogue is read after its own image, or after "
                "images whose captions do not name v."
            ),
            *warning,
            H.table(enc, caption="Image encoder (dino_features)"),
        ]
    )


def visual_page(
    counts: dict,
    targets: pd.DataFrame,
    eval_set: pd.DataFrame,
    encoder: dict,
    curve: pd.DataFrame,
    mechanisms: list[tuple[str, str]],
    provenance: dict,
    plotly_src: str = BUNDLE,
) -> str:
    """The page: data and encoder, gain curves, then the mechanistic sections (title, html) as given;
    plotly.js loaded from `plotly_src`."""
    sections = [
        ("Data and encoder", _data_section(counts, targets, eval_set, encoder)),
        (
            "Grounding gain over training",
            gain_section(curve, rule=VISUAL_GAIN, by="setting", name="visual gain"),
        ),
        *mechanisms,
        ("Provenance", H.provenance_block(provenance)),
    ]
    source = (
        "Data: synthetic scenes in Visual Dialog v1.0 format (the embedded default), not Visual Dialog / "
        "MSCOCO; set paths.visdial_source and paths.visual_images (the paper profile does) for the paper's data. "
        if counts.get("split") == "synthetic"
        else f"Data: Visual Dialog file of split {counts.get('split')!r}. "
    )
    intro = source + (
        "Visual Dialog-style dialogues: a caption (its target nouns as v<ENV>; every word under env_marking: "
        "all) or the image itself (DINOv2 patch features read as a prefix) is the environment, the "
        "question/answer turns are speech (target nouns as v<LAN>). Grounded: the "
        "matched environment makes v<LAN> less surprising (Wu et al., arXiv 2510.13796); attention "
        "saliency, aggregate/gather heads and their ablation show where the environment reaches the "
        "prediction."
    )
    return H.page("Symbol grounding in visual dialogue", sections, intro=intro, plotly_src=plotly_src)
