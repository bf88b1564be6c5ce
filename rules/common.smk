# Shared helpers for every study's rules.
P = config["paths"]
SEEDS = config["base"]["seeds"]


def per_seed(path_key, suffix=".parquet"):
    """One file per configured seed under a paths: directory."""
    return expand(P[path_key] + "/seed{seed}" + suffix, seed=SEEDS)


def per_assoc_run(path_key, suffix=".parquet"):
    """One file per (layers, seed) run of the association study under a paths: directory."""
    runs = config["assoc_runs"]
    return expand(P[path_key] + "/L{layers}_seed{seed}" + suffix, layers=runs["layers"], seed=runs["seeds"])
