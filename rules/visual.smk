# Visual-dialogue grounding (study G, issue 5): data stages; same commands as dvc.yaml.


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
