"""Study G, symbol grounding (Wu et al.): CHILDES text, visual dialogue and images; analyses and reports."""
