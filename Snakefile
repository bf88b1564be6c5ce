# Every rule comes from the stages DVC runs (pipeline.yaml, as dvc.yaml is generated): one rule per DVC stage, its matrix axes
# as wildcards (binding_train@0 is the job of rule binding_train with seed=0); same commands, deps, outs
# and params as DVC. Cluster settings: profiles/; a job's memory, time and GPU: core/resources.py; a
# stage that does not compute on the device runs here, as a local rule.
import sys

from emergence.check import main as check_params
from emergence.core.checkout import hold_checkout
from emergence.core.declared import GUARD
from emergence.core.io import PipelineError
from emergence.core.pipeline import is_directory, snakemake_rules
from emergence.core.resources import on_device, rule_resources

# params.yaml checked as `make check` does, before Snakemake's loader (keeps the later duplicate key)
if check_params(["params.yaml", "--estimate", "none"]) != 0:
    sys.exit(1)

configfile: "params.yaml"

RULES = snakemake_rules(config)
GUARDED = [out for r in RULES if r.name == GUARD for out in r.outs]  # the check above guards the rules here


def guarded(path):
    """The guard's stamp, or a code digest in its folder: each rule has its digest as a param instead."""
    return any(path == out or path.startswith(out + "/") for out in GUARDED)


# One engine per checkout: the top-level run (not a dry run, not a job's own invocation: those have no
# hooks) holds DVC's repository lock until it exits, or stops with one line while `dvc repro` runs.
onstart:
    try:
        hold_checkout(".", "snakemake")
    except PipelineError as e:
        sys.exit(f"error: {e}")


rule all:
    default_target: True
    input:
        [out for r in RULES for out in r.targets],


for r in RULES:

    rule:
        name:
            r.name
        input:
            [i for i in r.inputs if not guarded(i)],
        output:
            [directory(out) if is_directory(out) else out for out in r.outs],
        params:
            **r.param_functions(config),
        wildcard_constraints:
            **r.constraints,
        threads: config["base"]["threads"]
        resources:
            **(rule_resources(r, config) if on_device(list(r.params.values())) else {}),
        localrule: not on_device(list(r.params.values()))
        log:
            r.log,
        shell:
            "{params.stage_command} 2> {log}"
