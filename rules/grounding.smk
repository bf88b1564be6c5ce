# Symbol-grounding study (text): same stages and commands as dvc.yaml.
# Runs are (model, seed) pairs from params.yaml's grounding_runs section; the
# attention analyses (saliency, heads, ablation) cover grounding_saliency.models.

wildcard_constraints:
    model="[a-z][a-z0-9]*",


def per_grounding_run(path_key, models_of="grounding_runs"):
    return expand(P[path_key] + "/{model}_seed{seed}.parquet",
                  model=config[models_of]["models"], seed=config["grounding_runs"]["seeds"])


RUN = "/{model}_seed{seed}"


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
        "src/emergence/data/grounding_inputs.py",
        P["childes_turns"],
        P["grounding_vocab"],
    output:
        P["grounding_eval"],
    params:
        grounding_eval=config["grounding_eval"],
        seq_len=config["grounding_train"]["seq_len"],
    log:
        "logs/grounding_eval_set.log",
    shell:
        "python -m stages.grounding_eval_set 2> {log}"


rule grounding_train:
    input:
        "stages/grounding_train.py",
        "src/emergence/data/grounding.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/models/registry.py",
        "src/emergence/models/hooks.py",
        "src/emergence/models/transformer.py",
        "src/emergence/models/mamba2.py",
        "src/emergence/models/lstm.py",
        "src/emergence/models/token_lm.py",
        "src/emergence/train",
        P["childes_turns"],
        P["grounding_vocab"],
        P["grounding_eval"],
    output:
        directory(P["grounding_runs"] + RUN),
    params:
        device=config["base"]["device"],
        model=lambda w: config["grounding_models"][w.model],
        grounding_train=config["grounding_train"],
    threads: config["base"]["threads"]
    log:
        "logs/grounding_train_{model}_seed{seed}.log",
    shell:
        "python -m stages.grounding_train --model {wildcards.model} --seed {wildcards.seed} 2> {log}"


rule grounding_gain:
    input:
        "stages/grounding_gain.py",
        "src/emergence/analysis/grounding_gain.py",
        "src/emergence/data/grounding_inputs.py",
        P["grounding_vocab"],
        P["grounding_eval"],
        P["grounding_runs"] + RUN,
    output:
        P["grounding_gain"] + RUN + ".parquet",
    threads: config["base"]["threads"]
    log:
        "logs/grounding_gain_{model}_seed{seed}.log",
    shell:
        "python -m stages.grounding_gain --model {wildcards.model} --seed {wildcards.seed} 2> {log}"


rule grounding_cooc:
    input:
        "stages/grounding_cooc.py",
        "src/emergence/analysis/grounding_cooc.py",
        "src/emergence/data/grounding_inputs.py",
        P["childes_turns"],
        P["grounding_vocab"],
        P["grounding_eval"],
        per_grounding_run("grounding_gain"),
    output:
        P["grounding_cooc"],
        P["grounding_cooc_words"],
    params:
        grounding_cooc=config["grounding_cooc"],
    log:
        "logs/grounding_cooc.log",
    shell:
        "python -m stages.grounding_cooc 2> {log}"


rule grounding_lens:
    input:
        "stages/grounding_lens.py",
        "src/emergence/analysis/tuned_lens.py",
        "src/emergence/analysis/grounding_gain.py",
        "src/emergence/data/grounding_inputs.py",
        P["childes_turns"],
        P["grounding_vocab"],
        P["grounding_eval"],
        P["grounding_runs"] + RUN,
    output:
        P["grounding_lens"] + RUN + ".parquet",
    params:
        grounding_lens=config["grounding_lens"],
    threads: config["base"]["threads"]
    log:
        "logs/grounding_lens_{model}_seed{seed}.log",
    shell:
        "python -m stages.grounding_lens --model {wildcards.model} --seed {wildcards.seed} 2> {log}"


rule grounding_saliency:
    input:
        "stages/grounding_saliency.py",
        "src/emergence/analysis/grounding_saliency.py",
        "src/emergence/analysis/saliency.py",
        "src/emergence/data/grounding_inputs.py",
        P["grounding_vocab"],
        P["grounding_eval"],
        P["grounding_runs"] + RUN,
    output:
        P["grounding_saliency"] + RUN + ".parquet",
    params:
        grounding_saliency=config["grounding_saliency"],
    threads: config["base"]["threads"]
    log:
        "logs/grounding_saliency_{model}_seed{seed}.log",
    shell:
        "python -m stages.grounding_saliency --model {wildcards.model} --seed {wildcards.seed} 2> {log}"


rule grounding_heads:
    input:
        "stages/grounding_heads.py",
        "src/emergence/analysis/grounding_saliency.py",
        P["grounding_saliency"] + RUN + ".parquet",
    output:
        P["grounding_heads"] + RUN + ".parquet",
    params:
        grounding_heads=config["grounding_heads"],
    log:
        "logs/grounding_heads_{model}_seed{seed}.log",
    shell:
        "python -m stages.grounding_heads --model {wildcards.model} --seed {wildcards.seed} 2> {log}"


rule grounding_ablation:
    input:
        "stages/grounding_ablation.py",
        "src/emergence/analysis/grounding_ablation.py",
        "src/emergence/analysis/grounding_saliency.py",
        "src/emergence/analysis/binding_ablation.py",
        "src/emergence/data/grounding_inputs.py",
        P["grounding_vocab"],
        P["grounding_eval"],
        P["grounding_runs"] + RUN,
        P["grounding_heads"] + RUN + ".parquet",
    output:
        P["grounding_ablation"] + RUN + ".parquet",
    params:
        grounding_ablation=config["grounding_ablation"],
    threads: config["base"]["threads"]
    log:
        "logs/grounding_ablation_{model}_seed{seed}.log",
    shell:
        "python -m stages.grounding_ablation --model {wildcards.model} --seed {wildcards.seed} 2> {log}"


rule grounding_report:
    input:
        "stages/grounding_report.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/report/grounding.py",
        "src/emergence/report/grounding_mech.py",
        "src/emergence/report/html.py",
        "src/emergence/report/plots.py",
        "src/emergence/report/provenance.py",
        P["childes_counts"],
        P["grounding_targets"],
        P["grounding_eval"],
        per_grounding_run("grounding_gain"),
        P["grounding_cooc"],
        per_grounding_run("grounding_lens"),
        per_grounding_run("grounding_saliency", "grounding_saliency"),
        per_grounding_run("grounding_heads", "grounding_saliency"),
        per_grounding_run("grounding_ablation", "grounding_saliency"),
    output:
        P["grounding_report"],
        P["grounding_plots"],
        P["grounding_metrics"],
    params:
        grounding_runs=config["grounding_runs"],
        saliency_models=config["grounding_saliency"]["models"],
        grounding_cooc=config["grounding_cooc"],
        grounding_heads=config["grounding_heads"],
    log:
        "logs/grounding_report.log",
    shell:
        "python -m stages.grounding_report 2> {log}"
