# Variable-binding study: same stages and commands as dvc.yaml.
# `params:` lists the params.yaml sections a stage reads, so editing one
# reruns exactly the rules that depend on it.


rule binding_data:
    input:
        "stages/binding_data.py",
        "src/emergence/data/binding.py",
        "src/emergence/data/binding_heuristics.py",
    output:
        P["binding_programs"],
        P["binding_heuristics"],
    params:
        binding_data=config["binding_data"],
    log:
        "logs/binding_data.log",
    shell:
        "python -m stages.binding_data 2> {log}"


rule binding_train:
    input:
        "stages/binding_train.py",
        "src/emergence/data/binding_batches.py",
        "src/emergence/data/binding_io.py",
        "src/emergence/data/tokenizer.py",
        "src/emergence/models/registry.py",
        "src/emergence/models/hooks.py",
        "src/emergence/models/transformer.py",
        "src/emergence/train",
        P["binding_programs"],
    output:
        directory(P["binding_runs"] + "/seed{seed}"),
    params:
        device=config["base"]["device"],
        binding_model=config["binding_model"],
        binding_train=config["binding_train"],
    threads: config["base"]["threads"]
    log:
        "logs/binding_train_seed{seed}.log",
    shell:
        "python -m stages.binding_train --seed {wildcards.seed} 2> {log}"


rule binding_trajectory:
    input:
        "stages/binding_trajectory.py",
        "src/emergence/analysis/binding_trajectory.py",
        "src/emergence/data/binding_batches.py",
        P["binding_programs"],
        P["binding_runs"] + "/seed{seed}",
    output:
        P["binding_trajectory"] + "/seed{seed}.parquet",
        P["binding_phases"] + "/seed{seed}.parquet",
        P["binding_predictions"] + "/seed{seed}.parquet",
    params:
        binding_trajectory=config["binding_trajectory"],
    threads: config["base"]["threads"]
    log:
        "logs/binding_trajectory_seed{seed}.log",
    shell:
        "python -m stages.binding_trajectory --seed {wildcards.seed} 2> {log}"


rule binding_patching:
    input:
        "stages/binding_patching.py",
        "src/emergence/analysis/binding_patching.py",
        "src/emergence/data/binding_batches.py",
        P["binding_programs"],
        P["binding_runs"] + "/seed{seed}",
    output:
        P["binding_patching"] + "/seed{seed}.parquet",
    params:
        binding_patching=config["binding_patching"],
    threads: config["base"]["threads"]
    log:
        "logs/binding_patching_seed{seed}.log",
    shell:
        "python -m stages.binding_patching --seed {wildcards.seed} 2> {log}"


rule binding_ablation:
    input:
        "stages/binding_ablation.py",
        "src/emergence/analysis/binding_ablation.py",
        "src/emergence/data/binding_batches.py",
        P["binding_programs"],
        P["binding_runs"] + "/seed{seed}",
    output:
        P["binding_ablation"] + "/seed{seed}.parquet",
    params:
        binding_ablation=config["binding_ablation"],
    threads: config["base"]["threads"]
    log:
        "logs/binding_ablation_seed{seed}.log",
    shell:
        "python -m stages.binding_ablation --seed {wildcards.seed} 2> {log}"


rule binding_report:
    input:
        "stages/binding_report.py",
        "src/emergence/report/binding.py",
        "src/emergence/report/html.py",
        "src/emergence/report/plots.py",
        "src/emergence/report/provenance.py",
        P["binding_programs"],
        per_seed("binding_trajectory"),
        per_seed("binding_phases"),
        per_seed("binding_predictions"),
        per_seed("binding_patching"),
        per_seed("binding_ablation"),
    output:
        P["binding_report"],
        P["binding_plots"],
        P["binding_metrics"],
    params:
        seeds=SEEDS,
        report=config["report"],
    log:
        "logs/binding_report.log",
    shell:
        "python -m stages.binding_report 2> {log}"
