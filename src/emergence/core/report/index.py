"""The project index page: per study, its acceptance claims (pass / fail / not measured, with the
number behind each), its headline figures beside the paper's, links into its page; the benchmark
table; and how the run was made (docs/index_page.md says where every number comes from)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import pandas as pd

from emergence.core.report import html as H
from emergence.core.report.claims import FAIL, NOT_MEASURED, PASS, Claim, Figure, verdict

STATUS_CLASS = {PASS: "ok", FAIL: "bad", NOT_MEASURED: "note"}


@dataclass(frozen=True)
class Study:
    key: str  # the `study` of its claims and figures
    title: str
    summary: str
    href: str | None  # its page, relative to the index; None when the page has not been built
    metrics: dict | None  # its metrics JSON; None when absent


def anchor_href(study: Study, section: str) -> str | None:
    return None if study.href is None else f"{study.href}#{H.anchor(section)}"


def missing_sections(page_html: str, sections: list[str]) -> list[str]:
    """Sections a link would point to that the page has no anchor for."""
    return sorted({s for s in sections if f'id="{H.anchor(s)}"' not in page_html})


def _linked(text: str, href: str | None) -> str:
    return H.esc(text) if href is None else H.link(text, href)


def _number(value: float | None) -> str:
    return H.esc(NOT_MEASURED) if value is None else H.esc(f"{value:.6g}")


def claims_table(study: Study, claims: list[Claim]) -> tuple[str, Counter]:
    counts: Counter = Counter()
    rows = []
    for claim in claims:
        v = verdict(claim, study.metrics)
        counts[v.status] += 1
        rows.append(
            [
                H.esc(claim.text),
                H.span(v.status, STATUS_CLASS[v.status]),
                _number(v.value),
                H.esc(f"{claim.op} {claim.threshold:g}"),
                f"<code>{H.esc(claim.where)}</code>",
                H.esc(claim.rule),
                _linked("section", anchor_href(study, claim.section)),
            ]
        )
    head = ["claim", "result", "number", "rule", "read from", "source of the rule", "shown in"]
    return H.fragment_table(head, rows, [True, True, False, True, True, True, True], "Acceptance claims"), counts


def figures_table(study: Study, figures: list[Figure]) -> str:
    rows = [
        [
            H.esc(f.label),
            H.esc(f.ours(study.metrics)),
            H.esc(f.paper),
            f"<code>{H.esc(f.where)}</code>",
            _linked("section", anchor_href(study, f.section)),
        ]
        for f in figures
    ]
    head = ["figure", "ours", "paper", "read from", "shown in"]
    return H.fragment_table(head, rows, [True, False, True, True, True], "Headline figures beside the paper's")


def study_section(study: Study, claims: list[Claim], figures: list[Figure], metrics_path: str) -> tuple[str, Counter]:
    page = (
        H.para("The study page has not been built.", "note")
        if study.href is None
        else f"<p>{H.link('Open the study page', study.href)}: {H.esc(study.summary)}</p>"
    )
    source = H.para(
        f"Numbers from {metrics_path}" + ("" if study.metrics is not None else " (absent: nothing measured)") + "."
    )
    table, counts = claims_table(study, claims)
    return "\n".join([page, source, table, figures_table(study, figures)]), counts


def summary_table(studies: list[Study], counts: dict[str, Counter]) -> str:
    rows = [
        [
            H.link(s.title, f"#{H.anchor(s.title)}"),
            *(H.span(str(counts[s.key][status]), STATUS_CLASS[status]) for status in (PASS, FAIL, NOT_MEASURED)),
            _linked("page", s.href),
        ]
        for s in studies
    ]
    head = ["study", "claims passed", "failed", "not measured", "study page"]
    return H.fragment_table(head, rows, [True, False, False, False, True])


def provenance_section(record: dict) -> str:
    """Git revision, params hash, seeds and input hashes (the same for every engine), then what
    only this run knows (machine, engines, wall time per stage) inside a run-specific block."""
    hashes = pd.DataFrame(sorted(record["data_hashes"].items()), columns=["file", "sha256"])
    stages = pd.DataFrame(record["stage_times"])
    engines = sorted({str(r["engine"]) for r in record["records"] if r["engine"]})
    run = [
        H.para(f"Machine (where this page was built): {record['machine']}"),
        H.para("Engine: " + (", ".join(engines) if engines else "not recorded")),
    ]
    if record["records"]:
        run += [
            H.table(
                stages, caption="Wall time per stage, from the stage records (logs/stages/)", float_format="{:.1f}"
            ),
            "<details><summary>Every stage record</summary>"
            + H.table(pd.DataFrame(record["records"]).astype(object), float_format="{:.1f}")
            + "</details>",
        ]
    else:
        run.append(H.para("Wall time per stage: not recorded (no stage records under logs/stages/).", "note"))
    return "\n".join(
        [
            H.para(f"Git revision: {record['git_revision']}"),
            H.para(f"Params hash (sha256 of {record['params_file']}): {record['params_hash']}"),
            H.para("Seeds: " + ", ".join(str(s) for s in record["seeds"])),
            H.table(hashes, caption="Inputs of this page (sha256)"),
            H.run_specific("\n".join(run)),
        ]
    )


def index_page(
    studies: list[Study],
    claims: list[Claim],
    figures: list[Figure],
    metrics_paths: dict[str, str],
    bench: str,
    record: dict,
) -> str:
    """studies in display order; claims and figures of every study (matched by `study`); metrics_paths:
    study key -> its metrics file as shown; bench: the Benchmarks section (html); record: provenance."""
    counts, sections = {}, []
    for study in studies:
        body, counts[study.key] = study_section(
            study,
            [c for c in claims if c.study == study.key],
            [f for f in figures if f.study == study.key],
            metrics_paths[study.key],
        )
        sections.append((study.title, body))
    rule = H.para(
        "A claim passes when its number meets the rule; a number that is not in the metrics file is "
        f"'{NOT_MEASURED}', never a pass."
    )
    return H.page(
        "Emergence: study reports",
        [("Summary", summary_table(studies, counts) + "\n" + rule), *sections, ("Benchmarks", bench),
         ("Provenance", provenance_section(record))],
        intro="How grounding, associations and variable binding emerge in small language models: what each "
        "study found, how it compares with its paper, and whether each claim held.",
    )  # fmt: skip
