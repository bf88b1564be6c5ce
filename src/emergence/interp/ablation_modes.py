"""How a head is ablated (ablation.py): its output replaced by zeros, or by its mean over reference inputs.
No torch, so the params rules that name a mode load it without the ablation code."""

MODES = ("zero", "mean")
