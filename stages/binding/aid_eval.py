"""One aid variant's run (binding_aid_train) beside the default: accuracy, phases and patching by chain
depth, measured as binding_trajectory and binding_patching measure the default's runs."""

from __future__ import annotations

import numpy as np

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import load_named_checkpoint
from emergence.studies.binding.aid_table import aid_rows
from emergence.studies.binding.patching import make_counterfactual_pairs, patching_table
from emergence.studies.binding.patching_params import PatchingParams
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.trajectory import detect_phases, run_trajectory
from emergence.studies.binding.trajectory_params import PhaseParams


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True, per_aid=True)
    phase_p = from_dict(PhaseParams, section(params, "binding_trajectory"), "binding_trajectory")
    patch_p = from_dict(PatchingParams, section(params, "binding_patching"), "binding_patching")
    tok = CharTokenizer()
    programs = load_programs(path_of(params, "binding_programs"))
    run_dir = path_of(params, "binding_aid_runs") / args.aid / f"seed{args.seed}"
    traj = run_trajectory(
        run_dir, subset(programs, "test", n=phase_p.n_programs, key="binding_trajectory.n_programs"), tok, args.seed
    )
    step, model = load_named_checkpoint(run_dir, patch_p.checkpoint, "binding_patching.checkpoint")
    pairs = make_counterfactual_pairs(subset(programs, "test"), np.random.default_rng(args.seed), patch_p.n_pairs)
    patching = patching_table(model, pairs, tok, seed=args.seed, step=step)
    rows = aid_rows(args.aid, args.seed, traj, detect_phases(traj, phase_p), patching)
    write_parquet(rows, path_of(params, "binding_aids") / f"{args.aid}-seed{args.seed}.parquet")


if __name__ == "__main__":
    raise SystemExit(main())
