"""Study B, variable binding (Wu, Geiger, Millière): programs, heuristics, trajectory, patching, ablation, report."""
