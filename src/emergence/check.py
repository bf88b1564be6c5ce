"""`python -m emergence check [params.yaml]`: validate the whole params file before anything runs.

Every section against its schema (see `emergence.params`), then the checks that
span sections (a run's model must be defined, attention analyses need
Transformer runs, ...). Prints every problem, one line each naming the key and
what is allowed, and exits 1 if there is any; a stage would otherwise find the
first one only when it starts, possibly after an hour of training upstream.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any

from emergence.bounds import CHECKS as SIZE_CHECKS
from emergence.core.config import PARAMS_FILE, read_params, spans
from emergence.core.declared import DECLARATION, unknown_section
from emergence.core.io import PipelineError
from emergence.core.train.config import SEED_MAX
from emergence.core.train.schedule import CheckpointPlan
from emergence.estimate import ENGINE_S, measure
from emergence.estimate import lines as estimate_lines
from emergence.machine import jobs_fit_the_device, missing_device, where_it_runs
from emergence.params import Checker, load_schemas
from emergence.paths_rules import path_problems
from emergence.studies.grounding.tokens import model_entry


def _models(params: dict, where: str) -> list[str]:
    value = params.get(where.split(".")[0], {}).get(where.split(".")[1], [])
    return value if isinstance(value, list) else []


@spans("grounding_models", "grounding_runs", "visual_runs")
def runs_use_defined_models(params: dict) -> list[str]:
    defined = params.get("grounding_models", {})
    return [
        f"{where}: {name!r} is not a grounding_models entry (have {sorted(defined)})"
        for where in ("grounding_runs.models", "visual_runs.models")
        for name in _models(params, where)
        if name not in defined
    ]


@spans("grounding_saliency", "visual_saliency", "grounding_runs", "visual_runs", "grounding_models")
def attention_analyses_have_heads(params: dict) -> list[str]:
    """Saliency, heads and ablation read attention patterns: Transformer runs of their study only."""
    problems = []
    for where, runs in (
        ("grounding_saliency.models", "grounding_runs.models"),
        ("visual_saliency.models", "visual_runs.models"),
    ):
        for name in _models(params, where):
            if name not in _models(params, runs):
                problems.append(f"{where}: {name!r} is not in {runs} {_models(params, runs)}")
                continue
            try:
                arch, _ = model_entry(params.get("grounding_models", {}), name)
            except PipelineError:
                continue  # reported by runs_use_defined_models
            if arch != "transformer":
                problems.append(f"{where}: {name!r} is a {arch}, which has no attention heads (transformer only)")
    return problems


@spans("assoc_words", "assoc_runs")
def word_run_is_trained(params: dict) -> list[str]:
    words, runs = params.get("assoc_words", {}), params.get("assoc_runs", {})
    n_layers, seed = words.get("n_layers", 3), words.get("seed", 0)
    if n_layers in runs.get("layers", []) and seed in runs.get("seeds", []):
        return []
    return [
        f"assoc_words: n_layers {n_layers}, seed {seed} is not a run of assoc_runs "
        f"(layers {runs.get('layers')}, seeds {runs.get('seeds')})"
    ]


@spans("binding_train", "binding_programs")
def stream_overrides_apply(params: dict) -> list[str]:
    """binding_train's stream_* keys change the stream only: refused when there is none, and a planted
    distractor or a chain layout needs the paper generator."""
    train = params.get("binding_train", {})
    distribution = params.get("binding_programs", {}).get("distribution", "balanced")
    problems = [
        f"binding_train.{key}: applies only with stream: true (set it to null)"
        for key in ("stream_hop_weight_power", "stream_distractor", "stream_links")
        if train.get(key) is not None and train.get("stream", False) is False
    ]
    for key, what in (("stream_distractor", "plants distractors"), ("stream_links", "lays chains out")):
        if train.get(key) is not None and distribution != "paper":
            problems.append(
                f"binding_train.{key}: only the paper generator {what}, "
                f"binding_programs.distribution is {distribution!r} (set it to null)"
            )
    return problems


@spans("grounding_marking", "grounding_runs")
def marking_run_is_a_default_run(params: dict) -> list[str]:
    """The word-rule ablation is read beside the default run of its model and seed: that run must exist."""
    marking = params.get("grounding_marking", {})
    model, seed = marking.get("model", "transformer4"), marking.get("seed", 0)
    seeds = params.get("grounding_runs", {}).get("seeds", [])
    if model in _models(params, "grounding_runs.models") and seed in seeds:
        return []
    return [
        f"grounding_marking: {model} seed {seed} is not a run of grounding_runs "
        f"(models {_models(params, 'grounding_runs.models')}, seeds {seeds})"
    ]


def _seeds_of_base(params: dict, name: str, why: str) -> list[str]:
    seeds = params.get("base", {}).get("seeds", [])
    extra = [s for s in params.get(name, {}).get("seeds", []) if s not in seeds]
    return [f"{name}.seeds: {extra} not in base.seeds {seeds} ({why})"] if extra else []


@spans("binding_aids", "base")
def aid_seeds_are_default_seeds(params: dict) -> list[str]:
    """An aid variant is read beside the default run of its seed: that run must exist."""
    return _seeds_of_base(params, "binding_aids", "no default run to compare with")


@spans("binding_llc", "base")
def llc_seeds_are_binding_runs(params: dict) -> list[str]:
    """binding_llc estimates the LLC of the runs base.seeds trains."""
    return _seeds_of_base(params, "binding_llc", "no such run")


@spans("grounding_llc", "grounding_runs")
def llc_runs_are_grounding_runs(params: dict) -> list[str]:
    """grounding_llc estimates the LLC of runs grounding_runs trains."""
    runs, llc = params.get("grounding_runs", {}), params.get("grounding_llc", {})
    return [
        f"grounding_llc.{key}: {extra} not in grounding_runs.{key} {runs.get(key, [])} (no such run)"
        for key in ("models", "seeds")
        if (extra := [v for v in llc.get(key, []) if v not in runs.get(key, [])])
    ]


@spans()
def seeds_are_non_negative(params: dict) -> list[str]:
    """Every `seed` and every item of `seeds`, in any section: an integer in numpy's seed range
    [0, 2**32 - 1] (random generators refuse others, deep inside a stage; torch takes up to 2**64 - 1)."""
    problems = []
    for name, section in params.items():
        if not isinstance(section, dict):
            continue
        for key, value in section.items():
            values = value if key == "seeds" and isinstance(value, list) else [value] if key == "seed" else []
            ints = [v for v in values if isinstance(v, int) and not isinstance(v, bool)]
            if any(v < 0 for v in ints):
                problems.append(f"{name}.{key}: seeds are integers >= 0, got {value}")
            elif any(v > SEED_MAX for v in ints):
                problems.append(f"{name}.{key}: seeds are at most {SEED_MAX} (2**32 - 1, numpy's range), got {value}")
    return problems


# One metrics row per step lives in memory and in every resume state (10x the paper profile's 105,469
# steps); a checkpoint is a copy of the weights (the paper's association model: ~250 MB each).
MAX_STEPS, MAX_CHECKPOINTS = 1_000_000, 10_000


@spans("binding_train", "grounding_train", "visual_train", "assoc_train", "assoc_corpus")
def training_is_bounded(params: dict) -> list[str]:
    """Each training section's steps and the checkpoints its plan would save, counted before anything
    trains: `steps: 1000000000000` would otherwise train for ever and fill the disk with checkpoints."""
    problems = []
    for name in ("binding_train", "grounding_train", "visual_train", "assoc_train"):
        train = params.get(name)
        if not isinstance(train, dict):
            continue
        if name == "assoc_train":  # steps = epochs x batches per epoch (at most max_sequences / batch_size)
            key, per_epoch = "epochs", _assoc_batches_per_epoch(params.get("assoc_corpus", {}), train)
            given = [train.get("epochs"), train.get("checkpoint_every_epochs", 0)]
            given = [round(v * per_epoch) if _is_number(v) and math.isfinite(v) and v >= 0 else v for v in given]
            what = f"{train['epochs']} epochs of up to {per_epoch} steps"
        else:
            key, what = "steps", f"{train.get('steps')} steps"
            given = [train.get("steps"), train.get("checkpoint_every", 0)]
        given += [train.get("dense_until", 0), train.get("n_log_checkpoints", 20)]
        if not all(_is_count(v) for v in given) or given[0] < 1:
            continue  # the section's schema says what is wrong
        steps, every, dense, n_log = given
        n_checkpoints = CheckpointPlan(steps, dense, n_log, every).count()
        if steps > MAX_STEPS or n_checkpoints > MAX_CHECKPOINTS:
            problems.append(
                f"{name}.{key}: {what} would save {n_checkpoints} checkpoints; "
                f"the limits are {MAX_STEPS} steps and {MAX_CHECKPOINTS} checkpoints per run "
                "(lower it, or save fewer checkpoints)"
            )
    return problems


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _assoc_batches_per_epoch(corpus: dict, train: dict) -> int:
    batch, n = train.get("batch_size", 0), corpus.get("max_sequences", 0) if isinstance(corpus, dict) else 0
    if not (_is_count(batch) and _is_count(n)) or batch == 0 or n == 0:
        return 1  # full batch, or a corpus of unknown size: one batch per epoch at least
    return max(1, n // batch)


def _strings(value: Any, where: str) -> list[tuple[str, str]]:
    """(dotted key, value) of every string in a params section, nested mappings included."""
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in _strings(item, f"{where}.{key}")]
    return [(where, value)] if isinstance(value, str) else []


@spans()
def no_home_shorthand(params: dict) -> list[str]:
    """A path written `~/...`: DVC reads a dependency `~/corpora` as the folder `~` in the checkout, and
    no stage expands it either; one line with the full path to write instead. Refused here, before
    anything runs, because `dvc repro` deletes a stage's outputs before it starts the stage: the stage
    failing on its input would leave its last good outputs deleted."""
    return [
        f"{key}: {value!r} starts with ~, which nothing expands (DVC neither): write the full path, "
        f"{os.path.expanduser(value)!r}"
        for name, section in params.items()
        for key, value in _strings(section, name)
        if value.startswith("~")
    ]


CROSS_CHECKS: list[Callable[[dict], list[str]]] = [
    runs_use_defined_models,
    attention_analyses_have_heads,
    word_run_is_trained,
    stream_overrides_apply,
    marking_run_is_a_default_run,
    aid_seeds_are_default_seeds,
    llc_runs_are_grounding_runs,
    seeds_are_non_negative,
    training_is_bounded,
    no_home_shorthand,
]
CROSS_CHECKS += SIZE_CHECKS  # eval sets, top_k, probe words and image sizes against what they draw on


def problems_of(
    params: dict[str, Any],
    schemas: dict[str, Checker] | None = None,
    root: Path = Path("."),
    sections: Collection[str] | None = None,
) -> list[str]:
    """Every problem of a parsed params file, one line each; [] when it is valid. `schemas`: each
    section's checker (default: pipeline.yaml's `schemas:` of the checkout `root`). `sections`: only
    the problems of these sections (a stage's declared ones), from their schemas and the checks that
    span them; None: the whole file, and every device job's memory against the device."""
    schemas = load_schemas(root) if schemas is None else schemas
    wanted = set(schemas) | set(params) if sections is None else set(sections)
    problems = [unknown_section(name, list(schemas)) for name in params if name not in schemas and name in wanted]
    for name, check in schemas.items():
        if name not in wanted:
            continue
        if name not in params:
            problems.append(f"{name}: section missing")
            continue
        try:
            check(params)
        except PipelineError as e:
            problems.extend(str(e).splitlines())
    own = {name: value for name, value in params.items() if name in wanted}
    for cross in CROSS_CHECKS:
        if cross.sections and not cross.sections & wanted:
            continue
        try:
            problems.extend(cross(params if cross.sections else own))
        except (AttributeError, TypeError):  # a malformed section, already reported above
            pass
    if "paths" in wanted:
        problems.extend(path_problems(params, root))
    unknown = {line.split(":")[0] for line in problems if ": unknown key" in line}
    problems = [line for line in problems if line.split(":")[0] not in unknown or ": unknown key" in line]  # once
    if sections is not None:  # a line is a stage's problem when its key lies in a section the stage reads
        return [line for line in dict.fromkeys(problems) if re.split(r"[.:@ \[]", line, maxsplit=1)[0] in wanted]
    if not problems:  # jobs are sized only from params that passed every other check
        problems.extend(jobs_fit_the_device(params, root))
    return problems


def stage_problems(params: dict[str, Any], root: Path, sections: Collection[str], paths: Collection[str]) -> list[str]:
    """What a stage refuses before it touches any output, whoever started it (DVC, Snakemake, by hand):
    the problems of the sections it declares and of the `paths:` keys it uses, and a GPU it asks for
    but this machine lacks. The same rules as `python -m emergence check`, one line each."""
    problems = [
        line
        for line in problems_of(params, root=root, sections={*sections, "paths"})
        if not line.startswith("paths") or re.split(r"[.:]", line)[1] in paths
    ]
    device = missing_device(params) if "base" in sections else None
    return problems + [device] if device else problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m emergence check", description=__doc__.splitlines()[0])
    parser.add_argument("params", nargs="?", default=PARAMS_FILE, help="params file (default: %(default)s)")
    parser.add_argument("--root", type=Path, default=Path("."), help="the checkout (default: %(default)s)")
    parser.add_argument(
        "--estimate",
        choices=[*ENGINE_S, "none"],
        default="dvc",
        help="print the estimated time of a whole run by this engine here (default: %(default)s; none: skip "
        "the few seconds that measuring this machine takes)",
    )
    args = parser.parse_args(argv)
    sys.path.insert(0, str(args.root.resolve()))  # a schema may sit in a stage script (stages.<study>.<x>)
    n_sections = 0
    try:
        schemas = load_schemas(args.root)
        n_sections = len(schemas)
        params = read_params(args.params)
        problems = problems_of(params, schemas, args.root)
    except PipelineError as e:
        problems = [str(e)]
    for line in problems:
        print(f"error: {line}", file=sys.stderr)
    if problems:
        print(f"{args.params}: {len(problems)} problem(s); nothing was run", file=sys.stderr)
        return 1
    print(f"{args.params}: ok ({n_sections} sections)")
    for line in where_it_runs(params, args.root):
        print(line, file=sys.stderr if line.startswith("warning:") else sys.stdout)
    if args.estimate != "none" and (args.root / DECLARATION).is_file():
        rates = measure(params["base"]["threads"], args.root)
        try:
            said = estimate_lines(params, args.root, rates, args.estimate)
        except KeyError as e:  # the estimate reads params.yaml as written; a key left out takes its default
            said = [f"estimated time: not made, params.yaml leaves out {e.args[0]!r} (its default applies)"]
        print("\n".join(said), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
