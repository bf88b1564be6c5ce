# Token-association study: same stages and commands as dvc.yaml.
# Runs are (layers, seed) pairs from params.yaml's assoc_runs section.

wildcard_constraints:
    layers="[0-9]+",
    seed="[0-9]+",


rule assoc_stories:
    input:
        "stages/assoc_stories.py",
        "src/emergence/data/stories.py",
    output:
        P["assoc_stories"],
    params:
        assoc_stories=config["assoc_stories"],
    log:
        "logs/assoc_stories.log",
    shell:
        "python -m stages.assoc_stories 2> {log}"


rule assoc_corpus:
    input:
        "stages/assoc_corpus.py",
        "src/emergence/data/text_corpus.py",
        "src/emergence/data/chat.py",
        P["assoc_source"],
    output:
        P["assoc_corpus"],
        P["assoc_corpus_summary"],
    params:
        assoc_corpus=config["assoc_corpus"],
    log:
        "logs/assoc_corpus.log",
    shell:
        "python -m stages.assoc_corpus 2> {log}"


rule assoc_basis:
    input:
        "stages/assoc_basis.py",
        "src/emergence/analysis/assoc_theory.py",
        P["assoc_corpus"],
    output:
        P["assoc_basis"],
        P["assoc_basis_summary"],
    params:
        device=config["base"]["device"],
    threads: config["base"]["threads"]
    log:
        "logs/assoc_basis.log",
    shell:
        "python -m stages.assoc_basis 2> {log}"


rule assoc_train:
    input:
        "stages/assoc_train.py",
        "src/emergence/data/text_corpus.py",
        "src/emergence/models/registry.py",
        "src/emergence/models/hooks.py",
        "src/emergence/models/attn_only.py",
        "src/emergence/train",
        P["assoc_corpus"],
    output:
        directory(P["assoc_runs"] + "/L{layers}_seed{seed}"),
    params:
        device=config["base"]["device"],
        assoc_train=config["assoc_train"],
    threads: config["base"]["threads"]
    log:
        "logs/assoc_train_L{layers}_seed{seed}.log",
    shell:
        "python -m stages.assoc_train --layers {wildcards.layers} --seed {wildcards.seed} 2> {log}"


rule assoc_compare:
    input:
        "stages/assoc_compare.py",
        "src/emergence/analysis/assoc_compare.py",
        "src/emergence/analysis/assoc_theory.py",
        P["assoc_corpus"],
        P["assoc_basis"],
        P["assoc_runs"] + "/L{layers}_seed{seed}",
    output:
        P["assoc_cosines"] + "/L{layers}_seed{seed}.parquet",
    params:
        assoc_compare=config["assoc_compare"],
    threads: config["base"]["threads"]
    log:
        "logs/assoc_compare_L{layers}_seed{seed}.log",
    shell:
        "python -m stages.assoc_compare --layers {wildcards.layers} --seed {wildcards.seed} 2> {log}"


rule assoc_causal:
    input:
        "stages/assoc_causal.py",
        "src/emergence/analysis/assoc_compare.py",
        "src/emergence/analysis/assoc_theory.py",
        P["assoc_corpus"],
        P["assoc_basis"],
        P["assoc_runs"] + "/L{layers}_seed{seed}",
    output:
        P["assoc_causal"] + "/L{layers}_seed{seed}.parquet",
    params:
        assoc_causal=config["assoc_causal"],
    threads: config["base"]["threads"]
    log:
        "logs/assoc_causal_L{layers}_seed{seed}.log",
    shell:
        "python -m stages.assoc_causal --layers {wildcards.layers} --seed {wildcards.seed} 2> {log}"


rule assoc_order:
    input:
        "stages/assoc_order.py",
        "src/emergence/analysis/assoc_compare.py",
        "src/emergence/analysis/assoc_theory.py",
        "src/emergence/models/registry.py",
        "src/emergence/models/hooks.py",
        "src/emergence/models/attn_only.py",
        "src/emergence/train",
        P["assoc_corpus"],
    output:
        P["assoc_order"],
    params:
        assoc_order=config["assoc_order"],
    threads: config["base"]["threads"]
    log:
        "logs/assoc_order.log",
    shell:
        "python -m stages.assoc_order 2> {log}"


rule assoc_words:
    input:
        "stages/assoc_words.py",
        "src/emergence/analysis/assoc_compare.py",
        "src/emergence/analysis/assoc_theory.py",
        P["assoc_corpus"],
        P["assoc_basis"],
        P["assoc_runs"] + "/L{n_layers}_seed{seed}".format(**config["assoc_words"]),
    output:
        P["assoc_words"],
    params:
        assoc_words=config["assoc_words"],
    threads: config["base"]["threads"]
    log:
        "logs/assoc_words.log",
    shell:
        "python -m stages.assoc_words 2> {log}"


rule assoc_report:
    input:
        "stages/assoc_report.py",
        "src/emergence/report/associations.py",
        "src/emergence/report/html.py",
        "src/emergence/report/plots.py",
        "src/emergence/report/provenance.py",
        P["assoc_corpus_summary"],
        per_assoc_run("assoc_cosines"),
        per_assoc_run("assoc_causal"),
        P["assoc_order"],
        P["assoc_words"],
    output:
        P["assoc_report"],
        P["assoc_plots"],
        P["assoc_metrics"],
    params:
        assoc_runs=config["assoc_runs"],
    log:
        "logs/assoc_report.log",
    shell:
        "python -m stages.assoc_report 2> {log}"
