# Thin entry point: the rules live in rules/*.smk, the paths and params in
# params.yaml (the same file DVC reads), cluster settings in profiles/.
configfile: "params.yaml"

include: "rules/common.smk"
include: "rules/binding.smk"
include: "rules/assoc.smk"
include: "rules/grounding.smk"
include: "rules/visual.smk"
include: "rules/index.smk"


rule all:
    input:
        config["paths"]["index_report"],
