"""Oracles for the binding study's headline numbers: each recomputed a second way from the finished tiny
run's raw artifacts (checkpoints, programs, tables) and compared with what reports/metrics/binding.json
and the index's readers (emergence.claims) say.

The second way: every program is run by a small interpreter of its own text for its answer, fed to
the saved checkpoint one program at a time (no batching, no padding) and the answer read as the
argmax at the final ':'; means, phases and pooled rates are taken here with plain numpy / pandas."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml

from emergence.claims import BINDING, FIGURES
from emergence.core.train.checkpoint import load_checkpoint
from emergence.studies.binding.tokenizer import VOCAB

pytestmark = pytest.mark.pipeline

CHANCE = 0.1  # ten answer digits


# ---- helpers: the run's files, read directly --------------------------------------------------------


def params(run: Path) -> dict:
    return yaml.safe_load((run / "params.yaml").read_text())


def path(run: Path, key: str) -> Path:
    return run / params(run)["paths"][key]


def metrics(run: Path) -> dict:
    return json.loads(path(run, "binding_metrics").read_text())


def figure(label_start: str):
    (fig,) = [f for f in FIGURES if f.study == BINDING and f.label.startswith(label_start)]
    return fig


def steps(run_dir: Path) -> dict[int, Path]:
    """Every saved checkpoint of a run, by step, from the directory names."""
    found = {int(m.group(1)): p for p in run_dir.iterdir() if (m := re.fullmatch(r"step(\d+)", p.name))}
    assert found, f"no checkpoints in {run_dir}"
    return dict(sorted(found.items()))


def interpret(program: str) -> int:
    """The answer of `a=1\\nb=a\\n#b:`, by running its lines in order."""
    *lines, query = program.split("\n")
    values: dict[str, int] = {}
    for line in lines:
        lhs, rhs = line.split("=")
        values[lhs] = int(rhs) if rhs.isdigit() else values[rhs]
    return values[query[1]]


@torch.no_grad()
def answers_of(step_dir: Path, programs: pd.Series) -> np.ndarray:
    """The checkpoint's answer digit per program (-1 when its top token is not a digit)."""
    model, _ = load_checkpoint(step_dir)
    ids = {ch: i for i, ch in enumerate(VOCAB)}
    out = []
    for text in programs:
        logits, _ = model(torch.tensor([[ids[ch] for ch in text]]))
        top = VOCAB[int(logits[0, -1].argmax())]
        out.append(int(top) if top.isdigit() else -1)
    return np.array(out)


def programs(run: Path) -> pd.DataFrame:
    return pd.read_parquet(path(run, "binding_programs")).reset_index(drop=True)


def held_out(run: Path) -> pd.DataFrame:
    """The first binding_trajectory.n_programs programs of the main set's test split, in table order."""
    table = programs(run)
    n = params(run)["binding_trajectory"]["n_programs"]
    test = table[(table["set"] == "main") & (table["split"] == "test")]
    assert len(test) >= n
    return test.head(n)


def seeds(run: Path) -> list[int]:
    return list(params(run)["base"]["seeds"])


@pytest.fixture(scope="module")
def scored(tiny_run, one_thread) -> dict[int, dict[int, np.ndarray]]:
    """seed -> step -> answers of that checkpoint on the held-out programs."""
    test = held_out(tiny_run)
    runs = path(tiny_run, "binding_runs")
    return {
        s: {step: answers_of(d, test["program"]) for step, d in steps(runs / f"seed{s}").items()}
        for s in seeds(tiny_run)
    }


# ---- held-out accuracy --------------------------------------------------------------------------


def test_the_answers_scored_are_the_programs_own(tiny_run):
    table = programs(tiny_run)
    assert [interpret(p) for p in table["program"]] == table["answer"].tolist()


def test_heldout_accuracy_is_the_final_checkpoint_on_the_test_split_mean_over_both_seeds(tiny_run, scored):
    m, test = metrics(tiny_run), held_out(tiny_run)
    answers = test["program"].map(interpret).to_numpy()
    assert len(seeds(tiny_run)) == 2 and m["n_test_programs"] == len(test)
    per_seed = {}
    for seed, by_step in scored.items():
        final = max(by_step)
        assert m["final_step"][str(seed)] == final
        per_seed[seed] = float(np.mean(by_step[final] == answers))
        assert m["accuracy"]["per_seed"][str(seed)] == pytest.approx(per_seed[seed], abs=1e-6)
    expected = sum(per_seed.values()) / len(per_seed)
    assert m["accuracy"]["mean"] == pytest.approx(expected, abs=1e-6)
    assert figure("held-out accuracy").read(m) == pytest.approx(expected, abs=1e-6)


def test_final_predictions_are_the_final_checkpoints_answers_program_by_program(tiny_run, scored):
    """Finer than the mean: the pipeline's predictions table holds the final checkpoint's answer to exactly
    the held-out test programs (a val program, an earlier checkpoint or the other seed's model would show)."""
    test = held_out(tiny_run)
    for seed, by_step in scored.items():
        final = max(by_step)
        preds = pd.read_parquet(path(tiny_run, "binding_predictions") / f"seed{seed}.parquet")
        main = preds[(preds["set"] == "main")]
        assert set(main["split"]) == {"test"} and (main["step"] == final).all()
        assert main["program"].tolist() == test["program"].tolist()
        assert main["pred"].tolist() == by_step[final].tolist()
    # The run gives the choice something to get wrong: the checkpoints, and the seeds, answer differently.
    assert any(not np.array_equal(a, by_step[max(by_step)]) for by_step in scored.values() for a in by_step.values())
    finals = [by_step[max(by_step)] for by_step in scored.values()]
    assert not np.array_equal(*finals)


def test_generalisation_accuracy_is_the_final_checkpoint_on_the_whole_grid(tiny_run, one_thread):
    m, table = metrics(tiny_run), programs(tiny_run)
    grid = table[table["set"] == "gen"]
    assert len(grid) > 0
    answers = grid["program"].map(interpret).to_numpy()
    per_seed = {}
    for seed in seeds(tiny_run):
        run_steps = steps(path(tiny_run, "binding_runs") / f"seed{seed}")
        per_seed[seed] = float(np.mean(answers_of(run_steps[max(run_steps)], grid["program"]) == answers))
        assert m["generalisation_accuracy"]["per_seed"][str(seed)] == pytest.approx(per_seed[seed], abs=1e-6)
    expected = float(np.mean(list(per_seed.values())))
    assert figure("generalisation grid accuracy").read(m) == pytest.approx(expected, abs=1e-6)


# ---- phases -------------------------------------------------------------------------------------


def phase_starts(run: Path, by_step: dict[int, np.ndarray]) -> tuple[int, int]:
    """(heuristic phase start, traversal start), -1 for never, as docs/binding.md defines them: a
    heuristic is followed when the model gives its guess (a digit) where the guess is wrong; phase 2
    from the first checkpoint where some heuristic is followed at least heuristic_margin above chance,
    phase 3 from the first where the deepest hop class is at least traversal_accuracy right and above
    every heuristic's following rate (phase 2 counted only before phase 3)."""
    p, test = params(run)["binding_trajectory"], held_out(run)
    answers = test["answer"].to_numpy()
    deepest = test["hops"].to_numpy() == test["hops"].max()
    guesses = {c: test[c].to_numpy() for c in test.columns if c.startswith("heur_")}
    heuristic = traversal = -1
    for step, preds in by_step.items():
        rates = []
        for guess in guesses.values():
            wrong = (guess >= 0) & (guess != answers)
            if wrong.sum():
                rates.append(np.mean(preds[wrong] == guess[wrong]))
        follow = max(rates, default=0.0)
        deep = np.mean(preds[deepest] == answers[deepest])
        if traversal < 0 and deep >= p["traversal_accuracy"] and deep > follow:
            traversal = step
        if heuristic < 0 and traversal < 0 and follow >= CHANCE + p["heuristic_margin"]:
            heuristic = step
    return heuristic, traversal


def test_phases_and_share_of_seeds_reaching_traversal_from_every_checkpoint(tiny_run, scored):
    m = metrics(tiny_run)
    reached = []
    for seed, by_step in scored.items():
        heuristic, traversal = phase_starts(tiny_run, by_step)
        got = m["phases"][str(seed)]
        assert got["traversal"]["reached"] == (traversal >= 0)
        assert got["traversal"]["start_step"] == (traversal if traversal >= 0 else None)
        assert got["heuristic"]["reached"] == (heuristic >= 0)
        assert got["heuristic"]["start_step"] == (heuristic if heuristic >= 0 else None)
        reached.append(traversal >= 0)
    assert figure("share of seeds reaching").read(m) == pytest.approx(np.mean(reached))


def test_llc_rise_beside_the_phase_starts(tiny_run, scored):
    """binding.json "llc": per seed, the consecutive checkpoints between which the mean LLC over chains
    rises most, beside the phase starts recomputed above."""
    m = metrics(tiny_run)
    if not list(path(tiny_run, "binding_llc").glob("seed*.parquet")):
        pytest.skip("no LLC estimated at this profile (binding_llc.seeds empty): no LLC figure")
    for seed, by_step in scored.items():
        table = pd.read_parquet(path(tiny_run, "binding_llc") / f"seed{seed}.parquet")
        llc_steps = sorted(set(table["step"]))
        means = [table.loc[table["step"] == s, "llc"].sum() / (table["step"] == s).sum() for s in llc_steps]
        i = max(range(len(means) - 1), key=lambda k: means[k + 1] - means[k])
        heuristic, traversal = phase_starts(tiny_run, by_step)
        got = m["llc"][f"seed{seed}"]
        assert got["steps"] == llc_steps
        assert got["llc"] == pytest.approx(means, abs=1e-5)
        assert (got["llc_rise_from"], got["llc_rise_to"]) == (llc_steps[i], llc_steps[i + 1])
        assert (got["heuristic_from"], got["traversal_from"]) == (heuristic, traversal)
    text = figure("LLC's largest rise").read(m)
    for seed in scored:
        got = m["llc"][f"seed{seed}"]
        assert f"{got['llc_rise_from']:,}->{got['llc_rise_to']:,}" in text


# ---- patching by chain depth --------------------------------------------------------------------

AT = {"rhs": {"chain_root", "chain_rhs"}, "newline": {"chain_newline"}}  # docs/binding.md: the two positions


def best_by_depth(table: pd.DataFrame, classes: set[str]) -> dict[int, float]:
    """Per chain depth: the best layer's success, pooled over seeds, pairs and positions (hits / pairs)."""
    rows = table[(table["metric"] == "patch_success") & (table["chain_depth"] >= 0)]
    rows = rows[rows["position_class"].isin(classes)]
    best: dict[int, float] = {}
    for (depth, _layer), g in rows.groupby(["chain_depth", "layer"]):
        rate = float((g["value"] * g["n"]).sum() / g["n"].sum())
        best[int(depth)] = max(best.get(int(depth), -1.0), rate)
    return best


def test_weakest_patching_along_the_chain_at_the_final_checkpoint(tiny_run, scored):
    m = metrics(tiny_run)
    table = pd.concat(
        [pd.read_parquet(path(tiny_run, "binding_patching") / f"seed{s}.parquet") for s in seeds(tiny_run)]
    )
    assert params(tiny_run)["binding_patching"]["checkpoint"] == "final"
    for seed, by_step in scored.items():
        assert set(table.loc[table["seed"] == seed, "step"]) == {max(by_step)}
    weakest = {}
    for at, classes in AT.items():
        best = best_by_depth(table, classes)
        got = m["mechanisms"][f"patching_by_depth_{at}"]
        assert {int(d): v["success"] for d, v in got.items()} == pytest.approx(best, abs=1e-6)
        along = [v for d, v in best.items() if d >= 1]
        weakest[at] = min(along) if along else None
    position = m["mechanisms"]["patching_position"]
    assert m["mechanisms"]["patching_by_depth"] == m["mechanisms"][f"patching_by_depth_{position}"]
    chosen = max(AT, key=lambda at: (-1.0 if weakest[at] is None else weakest[at], at == "rhs"))
    assert position == chosen
    expected = weakest[position]
    read = figure("weakest best-layer patch success").read(m)
    assert read == (None if expected is None else pytest.approx(expected, abs=1e-6))
