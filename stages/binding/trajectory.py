"""Score every checkpoint of one seed: accuracy by hops, heuristic agreement, phases."""

from __future__ import annotations

import pandas as pd

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.core.train.checkpoint import find_checkpoint, load_checkpoint
from emergence.studies.binding.batches import encode_programs, predict_answers
from emergence.studies.binding.program_io import load_programs, subset
from emergence.studies.binding.tokenizer import CharTokenizer
from emergence.studies.binding.trajectory import detect_phases, run_trajectory
from emergence.studies.binding.trajectory_params import PhaseParams


def final_predictions(model, programs: pd.DataFrame, tok: CharTokenizer, seed: int, step: int) -> pd.DataFrame:
    data = encode_programs(programs["program"], programs["answer"], tok)
    preds = predict_answers(model, data, tok)
    cols = ["program_id", "set", "split", "n_lines", "hops", "answer", "program"]
    return programs[cols].assign(seed=seed, step=step, pred=preds, correct=preds == programs["answer"].to_numpy())


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv, per_seed=True)
    p = from_dict(PhaseParams, section(params, "binding_trajectory"), "binding_trajectory")
    tok = CharTokenizer()
    programs = load_programs(path_of(params, "binding_programs"))
    run_dir = path_of(params, "binding_runs") / f"seed{args.seed}"
    test = subset(programs, "test", n=p.n_programs, key="binding_trajectory.n_programs")
    traj = run_trajectory(run_dir, test, tok, args.seed)
    phases = detect_phases(traj, p)

    last_step, last_path = find_checkpoint(run_dir, "final")
    evaluated = pd.concat([test, subset(programs, "test", "gen")])
    preds = final_predictions(load_checkpoint(last_path)[0], evaluated, tok, args.seed, last_step)
    name = f"seed{args.seed}.parquet"
    write_parquet(traj, path_of(params, "binding_trajectory") / name)
    write_parquet(phases, path_of(params, "binding_phases") / name)
    write_parquet(preds, path_of(params, "binding_predictions") / name)
    print(phases.to_string(index=False))


if __name__ == "__main__":
    raise SystemExit(main())
