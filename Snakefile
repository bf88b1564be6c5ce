# Every rule comes from dvc.yaml (generated from pipeline.yaml): one rule per DVC
# stage instance, same command, deps, outs and params. Cluster settings live in profiles/.
from emergence.core.pipeline import is_directory, param_values, snakemake_jobs

configfile: "params.yaml"

JOBS = snakemake_jobs(config)


rule all:
    default_target: True
    input:
        [out for job in JOBS for out in job.outs],


for job in JOBS:

    rule:
        name:
            job.rule
        input:
            job.inputs,
        output:
            [directory(out) if is_directory(out) else out for out in job.outs],
        params:
            **param_values(job.params, config),
        threads: config["base"]["threads"]
        log:
            f"logs/{job.rule}.log",
        shell:
            job.cmd + " 2> {log}"
