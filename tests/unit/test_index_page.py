"""The index page as a reader sees it, parsed: the summary row of each study, its claims and figures
tables (cells, links into its page, numbers at six significant digits), the section of a study whose
page is not built, and the provenance section (hashes, seeds, per-stage times, every stage record)."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

from emergence.core.report import html as H
from emergence.core.report.claims import Claim, Figure, at
from emergence.core.report.index import Study, index_page
from emergence.core.report.provenance import stage_times

# ---- a small DOM -------------------------------------------------------------------------------------

VOID = {"meta", "br", "img", "hr", "input", "link"}


@dataclass
class Node:
    tag: str
    attrs: dict = field(default_factory=dict)
    children: list = field(default_factory=list)  # Node or str

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def all(self, tag: str) -> list[Node]:
        found = []
        for c in self.children:
            if isinstance(c, Node):
                found += [c] if c.tag == tag else []
                found += c.all(tag)
        return found

    def one(self, tag: str) -> Node:
        (found,) = self.all(tag)
        return found

    def kids(self, tag: str) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node) and c.tag == tag]

    def loose_text(self) -> str:
        """Text directly inside this element, outside any child element."""
        return "".join(c for c in self.children if isinstance(c, str))


class _Tree(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root")
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag):
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    tree = _Tree()
    tree.feed(html)
    tree.close()
    assert tree.stack == [tree.root], "unclosed elements"
    return tree.root


def sections(root: Node) -> dict[str, Node]:
    return {s.attrs["id"]: s for s in root.all("section")}


@dataclass
class Table:
    caption: str | None
    head: list[str]
    head_text: list[bool]  # th class="text" (left-aligned by the page's CSS)
    rows: list[list[Node]]

    def texts(self) -> list[list[str]]:
        return [[c.text() for c in r] for r in self.rows]

    def cell_text_class(self) -> list[list[bool]]:
        return [[c.attrs.get("class") == "text" for c in r] for r in self.rows]

    def column(self, name: str) -> list[Node]:
        i = self.head.index(name)
        return [r[i] for r in self.rows]


def table(node: Node) -> Table:
    caps = node.kids("caption")
    ths = node.one("thead").all("th")
    rows = [tr.kids("td") for tr in node.one("tbody").kids("tr")]
    return Table(
        caps[0].text() if caps else None,
        [th.text() for th in ths],
        [th.attrs.get("class") == "text" for th in ths],
        rows,
    )


def link_of(cell: Node) -> tuple[str, str] | None:
    links = cell.all("a")
    assert len(links) <= 1
    return (links[0].text(), links[0].attrs["href"]) if links else None


def spans(cell: Node) -> list[tuple[str, str]]:
    return [(s.text(), s.attrs.get("class")) for s in cell.all("span")]


# ---- inputs where every choice of the page shows -----------------------------------------------------

# alpha: built, metrics with a number needing rounding; beta: not built, no metrics; gamma: built elsewhere
ALPHA = Study("alpha", "Alpha study", "how alpha grows", "alpha.html", {"x": 0.123456789, "y": 2.0, "f": 1.23456})
BETA = Study("beta", "Beta & co", "beta things", None, None)
GAMMA = Study("gamma", "Gamma", "gamma things", "g/gamma.html", {"x": 5, "f": 0.5})
PATHS = {"alpha": "reports/metrics/alpha.json", "beta": "reports/metrics/beta.json", "gamma": "m/gamma.json"}

CLAIMS = [  # interleaved across studies: each section shows only its own
    Claim("alpha", "X above a half", "x.value", at("x"), ">", 0.5, "paper, eq. 3", "Headline numbers"),
    Claim("beta", "Beta reaches x", "x", at("x"), ">", 0.25, "ours", "Beta numbers"),
    Claim("alpha", "Y at least two", "y", at("y"), ">=", 2.0, "paper, table 1", "Causal check"),
    Claim("gamma", "Gamma small", "x", at("x"), "<=", 12345678.9, "gamma rule", "Gamma numbers"),
    Claim("alpha", "Z below a thousandth", "z", at("z"), "<", 0.001, "paper, p-value", "Headline numbers"),
]
FIGURES = [
    Figure("alpha", "Alpha headline", "f.mean", at("f"), "paper says 1.2", "Alpha figures", digits=2),
    Figure("beta", "Beta headline", "x", at("x"), "paper beta 7", "Beta figures"),
    Figure("gamma", "Gamma headline", "f", at("f"), "paper gamma 0.4", "Gamma figures"),
]


def record(records: list[dict], seeds=(3, 1, 2)) -> dict:
    return {
        "git_revision": "rev0123abc",
        "params_file": "profiles/tiny.yaml",
        "params_hash": "e" * 64,
        "seeds": list(seeds),
        "data_hashes": {"reports/metrics/zeta.json": "b" * 64, "reports/metrics/alpha.json": "a" * 64},
        "machine": "host-xyz",
        "records": records,
        "stage_times": stage_times(records, ["train", "report"]),
    }


RECORDS = [
    {"stage": "train@0", "engine": "snakemake", "wall_s": 10.04, "max_rss_mb": 300.0, "exit": 0},
    {"stage": "train@1", "engine": "dvc", "wall_s": 2.5, "max_rss_mb": 310.56, "exit": 1},
    {"stage": None, "engine": "", "wall_s": 7.25, "max_rss_mb": None, "exit": 0},  # a direct run: no engine
]


def render(studies=(ALPHA, BETA, GAMMA), run: dict | None = None) -> str:
    return index_page(list(studies), CLAIMS, FIGURES, PATHS, "<p>bench body</p>", run or record(RECORDS))


# built for each test, not once per module: a test then runs the page code itself, so a mutation run maps the
# code to every test that reads its output (a module fixture's calls count for the first test only)
@pytest.fixture
def page() -> Node:
    return parse(render())


@pytest.fixture
def secs(page) -> dict[str, Node]:
    return sections(page)


# ---- the page's frame ----------------------------------------------------------------------------------


def test_sections_in_order_with_headings_and_nav(page, secs):
    headings = ["Summary", "Alpha study", "Beta & co", "Gamma", "Benchmarks", "Provenance"]
    ids = ["summary", "alpha-study", "beta-co", "gamma", "benchmarks", "provenance"]
    assert list(secs) == ids
    assert [s.one("h2").text() for s in secs.values()] == headings
    nav = page.one("nav")
    assert [(a.text(), a.attrs["href"]) for a in nav.all("a")] == [(h, f"#{i}") for h, i in zip(headings, ids)]
    assert secs["benchmarks"].kids("p")[0].text() == "bench body"


def test_title_and_intro(page):
    assert page.one("title").text() == page.one("h1").text() == "Emergence: study reports"
    intro = page.one("body").kids("p")[0].text()
    assert intro.startswith("How grounding, associations and variable binding")
    assert "small language models: what each study found" in intro
    assert intro.endswith("whether each claim held.")


def test_no_stray_text_between_elements(page, secs):
    """Every word is inside a heading, paragraph, table or link: nothing left between blocks."""
    assert page.one("body").loose_text().strip() == ""
    for name, s in secs.items():
        assert s.loose_text().strip() == "", name
    for d in page.all("details"):
        assert d.loose_text().strip() == ""


def test_summary_rule_names_not_measured_never_a_pass(secs):
    (rule,) = secs["summary"].kids("p")
    assert rule.text().startswith("A claim passes")
    assert rule.text().endswith("'not measured', never a pass.")
    assert "metrics file" in rule.text()


# ---- the summary table -------------------------------------------------------------------------------


def test_summary_table_rows_counts_and_links(secs):
    t = table(secs["summary"].one("table"))
    assert t.caption is None
    assert t.head == ["study", "claims passed", "failed", "not measured", "study page"]
    assert t.head_text == [True, False, False, False, True]
    assert all(r == [True, False, False, False, True] for r in t.cell_text_class())
    assert [link_of(c) for c in t.column("study")] == [
        ("Alpha study", "#alpha-study"),
        ("Beta & co", "#beta-co"),
        ("Gamma", "#gamma"),
    ]
    # alpha: 0.123 > 0.5 fails, 2 >= 2 passes, z absent; beta: no metrics; gamma: 5 <= 1.2e7 passes
    counts = [[spans(r[i]) for i in (1, 2, 3)] for r in t.rows]
    assert counts == [
        [[("1", "ok")], [("1", "bad")], [("1", "note")]],
        [[("0", "ok")], [("0", "bad")], [("1", "note")]],
        [[("1", "ok")], [("0", "bad")], [("0", "note")]],
    ]
    pages = t.column("study page")
    assert [link_of(c) for c in pages] == [("page", "alpha.html"), None, ("page", "g/gamma.html")]
    assert pages[1].text() == "page"  # not built: the word, no link


# ---- a study's section ---------------------------------------------------------------------------------


def test_built_study_opens_its_page_and_names_its_metrics_file(secs):
    first, source = secs["alpha-study"].kids("p")[:2]
    assert link_of(first) == ("Open the study page", "alpha.html")
    assert first.text().endswith(": how alpha grows")
    assert "class" not in first.attrs
    assert source.text().endswith("reports/metrics/alpha.json.")  # nothing after the path but its full stop
    assert "absent" not in source.text()


def test_unbuilt_study_says_so_and_links_nothing(secs):
    first, source = secs["beta-co"].kids("p")[:2]
    assert first.attrs.get("class") == "note"
    assert first.text().startswith("The study page has not been built")
    assert "beta things" not in secs["beta-co"].text()
    assert "reports/metrics/beta.json (absent: nothing measured)" in source.text()
    assert source.text().endswith(").")
    assert secs["beta-co"].all("a") == []


def claims_of(sec: Node) -> Table:
    (t,) = [table(n) for n in sec.all("table") if table(n).caption == "Acceptance claims"]
    return t


def figures_of(sec: Node) -> Table:
    (t,) = [table(n) for n in sec.all("table") if table(n).caption == "Headline figures beside the paper's"]
    return t


def test_claims_table_of_a_built_study(secs):
    t = claims_of(secs["alpha-study"])
    assert t.head == ["claim", "result", "number", "rule", "read from", "source of the rule", "shown in"]
    assert t.head_text == [True, True, False, True, True, True, True]
    assert all(r == [True, True, False, True, True, True, True] for r in t.cell_text_class())
    assert [r[0] for r in t.texts()] == ["X above a half", "Y at least two", "Z below a thousandth"]
    assert [spans(c) for c in t.column("result")] == [[("FAIL", "bad")], [("pass", "ok")], [("not measured", "note")]]
    # 0.123456789 at six significant digits; 2.0 as 2; no number for z
    assert [c.text() for c in t.column("number")] == ["0.123457", "2", "not measured"]
    assert [c.text() for c in t.column("rule")] == ["> 0.5", ">= 2", "< 0.001"]
    assert [[n.text() for n in c.all("code")] for c in t.column("read from")] == [["x.value"], ["y"], ["z"]]
    assert [c.text() for c in t.column("source of the rule")] == ["paper, eq. 3", "paper, table 1", "paper, p-value"]
    assert [link_of(c) for c in t.column("shown in")] == [
        ("section", "alpha.html#headline-numbers"),
        ("section", "alpha.html#causal-check"),
        ("section", "alpha.html#headline-numbers"),
    ]


def test_claims_table_rounds_large_thresholds_and_counts_other_studies_apart(secs):
    t = claims_of(secs["gamma"])
    assert t.texts() == [["Gamma small", "pass", "5", "<= 1.23457e+07", "x", "gamma rule", "section"]]
    assert link_of(t.rows[0][-1]) == ("section", "g/gamma.html#gamma-numbers")


def test_claims_of_an_unbuilt_study_are_not_measured_and_link_nowhere(secs):
    t = claims_of(secs["beta-co"])
    assert t.texts() == [["Beta reaches x", "not measured", "not measured", "> 0.25", "x", "ours", "section"]]
    assert spans(t.rows[0][1]) == [("not measured", "note")]
    assert link_of(t.rows[0][-1]) is None


def test_figures_table_each_studys_own(secs):
    alpha, beta, gamma = (figures_of(secs[k]) for k in ("alpha-study", "beta-co", "gamma"))
    assert alpha.head == ["figure", "ours", "paper", "read from", "shown in"]
    assert alpha.head_text == [True, False, True, True, True]
    assert alpha.cell_text_class() == [[True, False, True, True, True]]
    # 1.23456 at the figure's two digits
    assert alpha.texts() == [["Alpha headline", "1.23", "paper says 1.2", "f.mean", "section"]]
    assert [n.text() for n in alpha.rows[0][3].all("code")] == ["f.mean"]
    assert link_of(alpha.rows[0][4]) == ("section", "alpha.html#alpha-figures")
    assert gamma.texts() == [["Gamma headline", "0.500", "paper gamma 0.4", "f", "section"]]
    assert link_of(gamma.rows[0][4]) == ("section", "g/gamma.html#gamma-figures")
    assert beta.texts() == [["Beta headline", "not measured", "paper beta 7", "x", "section"]]
    assert link_of(beta.rows[0][4]) is None


# ---- provenance ----------------------------------------------------------------------------------------


def run_block(html: str) -> tuple[str, str]:
    """(the provenance outside the run-specific block, the block)"""
    prov = html.split('<section id="provenance">')[1]
    before, rest = prov.split(H.RUN_SPECIFIC[0])
    block, after = rest.split(H.RUN_SPECIFIC[1])
    return before + after, block


def paras(node: Node) -> dict[str, Node]:
    """Paragraphs by the words before their first colon."""
    return {p.text().split(":")[0]: p for p in node.all("p")}


def inputs_table(prov: Node) -> Table:
    (t,) = [table(n) for n in prov.all("table") if table(n).caption == "Inputs of this page (sha256)"]
    return t


def test_provenance_states_revision_params_seeds_and_hashes(secs):
    p = paras(secs["provenance"])
    assert p["Git revision"].text().endswith(" rev0123abc")
    params = p["Params hash (sha256 of profiles/tiny.yaml)"].text()
    assert params.endswith(": " + "e" * 64)
    assert p["Seeds"].text().endswith(": 3, 1, 2")  # as recorded, in their order
    hashes = inputs_table(secs["provenance"])
    assert hashes.head == ["file", "sha256"]
    assert hashes.texts() == [["reports/metrics/alpha.json", "a" * 64], ["reports/metrics/zeta.json", "b" * 64]]


def test_provenance_machine_engines_and_stage_times_are_run_specific():
    html = render()
    fixed, block = run_block(html)
    assert "rev0123abc" in fixed and "a" * 64 in fixed and "host-xyz" not in fixed and "snakemake" not in fixed
    run = parse(block)
    assert run.loose_text().strip() == ""
    p = paras(run)
    assert p["Machine (where this page was built)"].text().endswith(": host-xyz")
    assert p["Engine"].text().endswith(": dvc, snakemake")  # sorted, once each; a direct run's empty engine left out
    stage_table = run.kids("table")[0]
    t = table(stage_table)
    assert t.caption.startswith("Wall time per stage") and t.caption.endswith("(logs/stages/)")
    rows = {r[0]: r for r in t.texts()}
    assert list(rows) == ["train", "report"]
    head = t.head
    train = dict(zip(head, rows["train"]))
    # 10.04 + 2.5 and the slowest instance, one decimal
    assert (train["wall s (sum)"], train["wall s (longest)"], train["max RSS MB"]) == ("12.5", "10.0", "310.6")
    assert (train["engine"], train["instances recorded"], train["failed"]) == ("dvc, snakemake", "2", "1")
    assert dict(zip(head, rows["report"]))["wall s (sum)"] == "not recorded"


def test_every_stage_record_is_listed_inside_a_details_block():
    _, block = run_block(render())
    run = parse(block)
    (details,) = run.kids("details")
    assert details.one("summary").text() == "Every stage record"
    t = table(details.one("table"))
    assert t.head == ["stage", "engine", "wall_s", "max_rss_mb", "exit"]
    walls = [r[t.head.index("wall_s")] for r in t.texts()]
    assert walls == ["10.0", "2.5", "7.2"]  # one decimal (7.25 is 7.2499... as a float)
    assert [r[t.head.index("max_rss_mb")] for r in t.texts()] == ["300.0", "310.6", "\u2013"]
    assert [r[t.head.index("engine")] for r in t.texts()] == ["snakemake", "dvc", ""]


def test_provenance_without_stage_records_says_not_recorded():
    html = render(run=record([], seeds=[7]))
    root = parse(html)
    prov = sections(root)["provenance"]
    assert paras(prov)["Seeds"].text().endswith(": 7")
    _, block = run_block(html)
    run = parse(block)
    p = paras(run)
    assert p["Machine (where this page was built)"].text().endswith(": host-xyz")
    assert p["Engine"].text().endswith(": not recorded")
    note = p["Wall time per stage"]
    assert note.attrs.get("class") == "note"
    assert "not recorded" in note.text() and "logs/stages/" in note.text()
    assert run.all("table") == [] and run.all("details") == []
