# The index page links every study report that exists.


rule index_report:
    input:
        "stages/index_report.py",
        "src/emergence/report/index.py",
        "src/emergence/report/html.py",
        P["binding_report"],
        P["assoc_report"],
        P["grounding_report"],
        P["visual_report"],
    output:
        P["index_report"],
    log:
        "logs/index_report.log",
    shell:
        "python -m stages.index_report 2> {log}"
