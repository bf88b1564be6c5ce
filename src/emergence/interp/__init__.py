"""Generic tools over hooked models (saliency, ablation, tuned lens, padding); imports only core, no study."""
