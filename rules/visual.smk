# Visual-dialogue grounding (study G): scenes, VisDial extraction, DINOv2 features, then
# (setting, model, seed) runs of the caption and image settings, their gain and, for
# visual_saliency.models, the attention analyses; same commands as dvc.yaml.


wildcard_constraints:
    setting="caption|image",


VISUAL_RUN = "/{setting}_{model}_seed{seed}"


def per_visual_run(path_key, models_of="visual_runs"):
    runs = config["visual_runs"]
    return expand(P[path_key] + VISUAL_RUN + ".parquet", setting=runs["settings"], model=config[models_of]["models"],
                  seed=runs["seeds"])


rule visual_scenes:
    input:
        "stages/visual_scenes.py",
        "src/emergence/data/scenes.py",
        "src/emergence/data/nouns.py",
    output:
        directory(P["visual_scenes"]),
    params:
        visual_scenes=config["visual_scenes"],
    log:
        "logs/visual_scenes.log",
    shell:
        "python -m stages.visual_scenes 2> {log}"


rule visdial_extract:
    input:
        "stages/visdial_extract.py",
        "src/emergence/data/visdial.py",
        P["visdial_source"],
    output:
        P["visual_dialogs"],
        P["visual_counts"],
    log:
        "logs/visdial_extract.log",
    shell:
        "python -m stages.visdial_extract 2> {log}"


rule dino_features:
    input:
        "stages/dino_features.py",
        "src/emergence/data/dino_features.py",
        "src/emergence/data/visdial.py",
        P["visual_dialogs"],
        P["visual_images"],
    output:
        directory(P["visual_features"]),
    params:
        device=config["base"]["device"],
        dino_features=config["dino_features"],
    threads: config["base"]["threads"]
    log:
        "logs/dino_features.log",
    shell:
        "python -m stages.dino_features 2> {log}"


rule visual_vocab:
    input:
        "stages/visual_vocab.py",
        "src/emergence/data/grounding.py",
        "src/emergence/data/visual_inputs.py",
        "src/emergence/data/nouns.py",
        "src/emergence/data/scenes.py",
        P["visual_dialogs"],
    output:
        P["visual_vocab"],
        P["visual_targets"],
    params:
        visual_vocab=config["visual_vocab"],
    log:
        "logs/visual_vocab.log",
    shell:
        "python -m stages.visual_vocab 2> {log}"


rule visual_eval_set:
    input:
        "stages/visual_eval_set.py",
        "src/emergence/data/grounding.py",
        "src/emergence/data/visual_grounding.py",
        "src/emergence/data/visual_inputs.py",
        P["visual_dialogs"],
        P["visual_vocab"],
    output:
        P["visual_eval"],
    params:
        visual_eval=config["visual_eval"],
        seq_len=config["visual_train"]["seq_len"],
    log:
        "logs/visual_eval_set.log",
    shell:
        "python -m stages.visual_eval_set 2> {log}"


rule visual_train:
    input:
        "stages/visual_train.py",
        "src/emergence/data/grounding.py",
        "src/emergence/data/visual_grounding.py",
        "src/emergence/data/visual_inputs.py",
        "src/emergence/models/registry.py",
        "src/emergence/models/hooks.py",
        "src/emergence/models/prefix.py",
        "src/emergence/models/transformer.py",
        "src/emergence/models/mamba2.py",
        "src/emergence/models/lstm.py",
        "src/emergence/models/token_lm.py",
        "src/emergence/train",
        P["visual_dialogs"],
        P["visual_vocab"],
        P["visual_eval"],
        P["visual_features"],
    output:
        directory(P["visual_runs"] + VISUAL_RUN),
    params:
        device=config["base"]["device"],
        model=lambda w: config["grounding_models"][w.model],
        visual_train=config["visual_train"],
    threads: config["base"]["threads"]
    log:
        "logs/visual_train_{setting}_{model}_seed{seed}.log",
    shell:
        "python -m stages.visual_train --setting {wildcards.setting} --model {wildcards.model} "
        "--seed {wildcards.seed} 2> {log}"


rule visual_gain:
    input:
        "stages/visual_gain.py",
        "src/emergence/analysis/grounding_gain.py",
        "src/emergence/analysis/visual_gain.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/data/visual_inputs.py",
        P["visual_vocab"],
        P["visual_eval"],
        P["visual_features"],
        P["visual_runs"] + VISUAL_RUN,
    output:
        P["visual_gain"] + VISUAL_RUN + ".parquet",
    threads: config["base"]["threads"]
    log:
        "logs/visual_gain_{setting}_{model}_seed{seed}.log",
    shell:
        "python -m stages.visual_gain --setting {wildcards.setting} --model {wildcards.model} "
        "--seed {wildcards.seed} 2> {log}"


# Attention analyses of both settings, for the Transformer models of visual_saliency.models.
rule visual_saliency:
    input:
        "stages/visual_saliency.py",
        "src/emergence/analysis/grounding_saliency.py",
        "src/emergence/analysis/saliency.py",
        "src/emergence/analysis/visual_gain.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/data/visual_inputs.py",
        P["visual_vocab"],
        P["visual_eval"],
        P["visual_features"],
        P["visual_runs"] + VISUAL_RUN,
    output:
        P["visual_saliency"] + VISUAL_RUN + ".parquet",
    params:
        visual_saliency=config["visual_saliency"],
    threads: config["base"]["threads"]
    log:
        "logs/visual_saliency_{setting}_{model}_seed{seed}.log",
    shell:
        "python -m stages.visual_saliency --setting {wildcards.setting} --model {wildcards.model} "
        "--seed {wildcards.seed} 2> {log}"


rule visual_heads:
    input:
        "stages/visual_heads.py",
        "src/emergence/analysis/grounding_saliency.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/data/visual_inputs.py",
        P["visual_saliency"] + VISUAL_RUN + ".parquet",
    output:
        P["visual_heads"] + VISUAL_RUN + ".parquet",
    params:
        visual_heads=config["visual_heads"],
    log:
        "logs/visual_heads_{setting}_{model}_seed{seed}.log",
    shell:
        "python -m stages.visual_heads --setting {wildcards.setting} --model {wildcards.model} "
        "--seed {wildcards.seed} 2> {log}"


rule visual_ablation:
    input:
        "stages/visual_ablation.py",
        "src/emergence/analysis/grounding_ablation.py",
        "src/emergence/analysis/grounding_saliency.py",
        "src/emergence/analysis/binding_ablation.py",
        "src/emergence/analysis/visual_gain.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/data/visual_inputs.py",
        P["visual_vocab"],
        P["visual_eval"],
        P["visual_features"],
        P["visual_runs"] + VISUAL_RUN,
        P["visual_heads"] + VISUAL_RUN + ".parquet",
    output:
        P["visual_ablation"] + VISUAL_RUN + ".parquet",
    params:
        visual_ablation=config["visual_ablation"],
    threads: config["base"]["threads"]
    log:
        "logs/visual_ablation_{setting}_{model}_seed{seed}.log",
    shell:
        "python -m stages.visual_ablation --setting {wildcards.setting} --model {wildcards.model} "
        "--seed {wildcards.seed} 2> {log}"


rule visual_report:
    input:
        "stages/visual_report.py",
        "src/emergence/analysis/grounding_saliency.py",
        "src/emergence/data/grounding_inputs.py",
        "src/emergence/data/visual_inputs.py",
        "src/emergence/report/grounding_visual.py",
        "src/emergence/report/grounding.py",
        "src/emergence/report/grounding_mech.py",
        "src/emergence/report/html.py",
        "src/emergence/report/plots.py",
        "src/emergence/report/provenance.py",
        P["visual_counts"],
        P["visual_features"],
        P["visual_targets"],
        P["visual_eval"],
        per_visual_run("visual_gain"),
        per_visual_run("visual_saliency", "visual_saliency"),
        per_visual_run("visual_heads", "visual_saliency"),
        per_visual_run("visual_ablation", "visual_saliency"),
    output:
        P["visual_report"],
        P["visual_metrics"],
    params:
        visual_runs=config["visual_runs"],
        saliency_models=config["visual_saliency"]["models"],
        visual_heads=config["visual_heads"],
    log:
        "logs/visual_report.log",
    shell:
        "python -m stages.visual_report 2> {log}"
