# Symbol-grounding study (text): same stages and commands as dvc.yaml.
# Runs are (arch, seed) pairs from params.yaml's grounding_runs section.

wildcard_constraints:
    arch="[a-z0-9]+",


def per_grounding_run(path_key, suffix=".parquet"):
    runs = config["grounding_runs"]
    return expand(P[path_key] + "/{arch}_seed{seed}" + suffix, arch=runs["archs"], seed=runs["seeds"])


rule childes_synth:
    input:
        "stages/childes_synth.py",
        "src/emergence/data/childes_synth.py",
        "src/emergence/data/nouns.py",
    output:
        directory(P["childes_synth"]),
    params:
        childes_synth=config["childes_synth"],
    log:
        "logs/childes_synth.log",
    shell:
        "python -m stages.childes_synth 2> {log}"


rule childes_extract:
    input:
        "stages/childes_extract.py",
        "src/emergence/data/childes.py",
        "src/emergence/data/chat.py",
        P["childes_source"],
    output:
        P["childes_turns"],
        P["childes_counts"],
    params:
        childes_extract=config["childes_extract"],
    log:
        "logs/childes_extract.log",
    shell:
        "python -m stages.childes_extract 2> {log}"


rule grounding_vocab:
    input:
        "stages/grounding_vocab.py",
        "src/emergence/data/grounding.py",
        "src/emergence/data/nouns.py",
        P["childes_turns"],
    output:
        P["grounding_vocab"],
        P["grounding_targets"],
    params:
        grounding_vocab=config["grounding_vocab"],
    log:
        "logs/grounding_vocab.log",
    shell:
        "python -m stages.grounding_vocab 2> {log}"


rule grounding_eval_set:
    input:
        "stages/grounding_eval_set.py",
        "src/emergence/data/grounding.py",
        P["childes_turns"],
        P["grounding_vocab"],
    output:
        P["grounding_eval"],
    params:
        grounding_eval=config["grounding_eval"],
    log:
        "logs/grounding_eval_set.log",
    shell:
        "python -m stages.grounding_eval_set 2> {log}"


rule grounding_train:
    input:
        "stages/grounding_train.py",
        "src/emergence/data/grounding.py",
        "src/emergence/models/registry.py",
        "src/emergence/models/hooks.py",
        "src/emergence/models/{arch}.py",
        "src/emergence/models/token_lm.py",
        "src/emergence/train",
        P["childes_turns"],
        P["grounding_vocab"],
        P["grounding_eval"],
    output:
        directory(P["grounding_runs"] + "/{arch}_seed{seed}"),
    params:
        device=config["base"]["device"],
        model=lambda w: config["grounding_models"][w.arch],
        grounding_train=config["grounding_train"],
    threads: config["base"]["threads"]
    log:
        "logs/grounding_train_{arch}_seed{seed}.log",
    shell:
        "python -m stages.grounding_train --arch {wildcards.arch} --seed {wildcards.seed} 2> {log}"


rule grounding_gain:
    input:
        "stages/grounding_gain.py",
        "src/emergence/analysis/grounding_gain.py",
        P["grounding_vocab"],
        P["grounding_eval"],
        P["grounding_runs"] + "/{arch}_seed{seed}",
    output:
        P["grounding_gain"] + "/{arch}_seed{seed}.parquet",
    threads: config["base"]["threads"]
    log:
        "logs/grounding_gain_{arch}_seed{seed}.log",
    shell:
        "python -m stages.grounding_gain --arch {wildcards.arch} --seed {wildcards.seed} 2> {log}"


rule grounding_report:
    input:
        "stages/grounding_report.py",
        "src/emergence/report/grounding.py",
        "src/emergence/report/html.py",
        "src/emergence/report/plots.py",
        "src/emergence/report/provenance.py",
        P["childes_counts"],
        P["grounding_targets"],
        P["grounding_eval"],
        per_grounding_run("grounding_gain"),
    output:
        P["grounding_report"],
        P["grounding_plots"],
        P["grounding_metrics"],
    params:
        grounding_runs=config["grounding_runs"],
    log:
        "logs/grounding_report.log",
    shell:
        "python -m stages.grounding_report 2> {log}"
