"""Every number the reports quote as the paper's appears in the texts we have of the papers (../shared/papers).

A number that is only remembered, or read in a version of the paper we do not hold, must not be shown as
the paper's: the reports say "not in our text" instead.
"""

from __future__ import annotations

import re

import pytest
from conftest import SHARED

from emergence.claims import FIGURES
from emergence.studies.assoc.report import PAPER_CAUSAL, PAPER_MIN_COSINE
from emergence.studies.binding.report import PAPER_PHASES
from emergence.studies.binding.report_mechanisms import PAPER_PATCHING
from emergence.studies.grounding.report_mech import PAPER_ABLATION

NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
SHARED_PAPERS = SHARED / "papers"


def numbers(text: str) -> set[str]:
    """Numbers written in text, thousands separators dropped ("105,400" -> "105400")."""
    return {n.replace(",", "") for n in NUMBER.findall(text)}


@pytest.fixture(scope="module")
def paper_text() -> str:
    """The papers' texts, thousands separators dropped. Their tables are extracted without separators
    ("200006.717.525.62***4.764.77" is one row), so a quoted number is looked for as a substring."""
    texts = sorted(SHARED_PAPERS.glob("*.txt"))
    if not texts:
        pytest.fail(f"{SHARED_PAPERS} has no paper texts: ../shared must sit beside the project")
    return "\n".join(p.read_text(encoding="utf-8") for p in texts).replace(",", "")


def quoted() -> list[tuple[str, str]]:
    """(where, number) for every number the project presents as the paper's."""
    out = [(f"FIGURES[{f.label}]", n) for f in FIGURES for n in numbers(f.paper)]
    out += [
        (f"assoc PAPER_MIN_COSINE[{t}][{w}]", f"{v:.6f}") for t, d in PAPER_MIN_COSINE.items() for w, v in d.items()
    ]
    out += [(f"assoc PAPER_CAUSAL[{w}]", n) for w, text in PAPER_CAUSAL.items() for n in numbers(text)]
    out += [(f"binding PAPER_PHASES[{k}]", n) for k, text in PAPER_PHASES.items() for n in numbers(text)]
    out += [("binding PAPER_PATCHING", f"{round(PAPER_PATCHING * 100)}")]
    for column in PAPER_ABLATION.columns:
        out += [
            (f"grounding PAPER_ABLATION[{column}]", f"{v:g}" if column == "step" else f"{v:.2f}")
            for v in PAPER_ABLATION[column]
        ]
    return out


def test_every_quoted_number_is_in_our_text_of_the_papers(paper_text):
    missing = [f"{where}: {n}" for where, n in quoted() if n not in paper_text]
    assert not missing, "quoted as the paper's but not in ../shared/papers:\n" + "\n".join(missing)


def test_the_check_sees_a_number_that_is_not_there(paper_text):
    # the word-level minimum cosines and causal losses once shown as the paper's: not in the texts we have
    for number in ("0.999496", "0.999169", "0.998486", "8.287", "6.19", "5.361"):
        assert number not in paper_text
    assert "0.999914" in paper_text and "105400" in paper_text
