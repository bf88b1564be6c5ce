"""Adding a stage with params of its own touches three files: its script, its pipeline.yaml entry
(with its schema line) and its params.yaml section; dvc.yaml is regenerated, never edited."""

from __future__ import annotations

import sys

import pandas as pd
import yaml
from conftest import project_copy, run
from refusals import assert_refused

from emergence.core.code_digest import instance_files
from emergence.core.pipeline import read_declaration

SCRIPT = '''\
"""Count the test programs of each hop class."""

from __future__ import annotations

from dataclasses import dataclass

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.studies.binding.program_io import load_programs


@dataclass
class HopCountParams:
    split: str = "test"


@stage_main
def main(argv: list[str] | None = None) -> None:
    args, params = start_stage(__doc__, argv)
    p = from_dict(HopCountParams, section(params, "binding_hop_counts"), "binding_hop_counts")
    programs = load_programs(path_of(params, "binding_programs"))
    counts = programs[programs["split"] == p.split].groupby("hops").size().rename("n").reset_index()
    write_parquet(counts, path_of(params, "binding_hop_counts"))


if __name__ == "__main__":
    raise SystemExit(main())
'''

ENTRY = """
  binding_hop_counts:
    cmd: python -m stages.binding.hop_counts
    deps:
      - ${paths.binding_programs}
    params:
      - binding_hop_counts
    outs:
      - ${paths.binding_hop_counts}
"""


def test_a_new_stage_is_one_script_one_entry_one_params_section(tmp_path):
    root = project_copy(tmp_path, profile=None)
    (root / "stages/binding/hop_counts.py").write_text(SCRIPT)
    decl = (root / "pipeline.yaml").read_text()
    stages_end = decl.index("\nplots:")
    decl = decl[:stages_end] + ENTRY + decl[stages_end:]
    (root / "pipeline.yaml").write_text(decl + "  binding_hop_counts: stages.binding.hop_counts:HopCountParams\n")
    params = (root / "params.yaml").read_text()
    params = params.replace("\npaths:\n", "\npaths:\n  binding_hop_counts: data/binding/hop_counts.parquet\n", 1)
    (root / "params.yaml").write_text(params + "\nbinding_hop_counts:\n  split: test\n")

    run([sys.executable, "-m", "emergence", "pipeline"], root)
    changed = run(["git", "status", "--porcelain"], root).stdout.splitlines()
    assert sorted(line[3:] for line in changed) == [
        "dvc.yaml",  # generated
        "params.yaml",
        "pipeline.yaml",
        "stages/binding/hop_counts.py",
    ]
    n_sections = len(yaml.safe_load(params)) + 1  # the shipped sections and the new one
    checked = run([sys.executable, "-m", "emergence", "check", "--estimate", "none"], root).stdout
    assert f"({n_sections} sections)" in checked

    # its code digest was derived, and both engines run it with the same command
    deps = yaml.safe_load((root / "dvc.yaml").read_text())["stages"]["binding_hop_counts"]["deps"]
    assert "${paths.code_digests}/binding_hop_counts.txt" in deps
    code = instance_files(read_declaration(root), yaml.safe_load((root / "params.yaml").read_text()), root)
    assert {"stages/binding/hop_counts.py", "src/emergence/studies/binding/program_io.py"} <= set(
        map(str, code["binding_hop_counts"])
    )
    run(["dvc", "repro", "binding_hop_counts"], root)
    counts = pd.read_parquet(root / "data/binding/hop_counts.parquet")
    programs = pd.read_parquet(root / "data/binding/programs.parquet")
    expected = programs[programs["split"] == "test"]["hops"].value_counts().to_dict()
    assert counts.set_index("hops")["n"].to_dict() == expected
    dry = run(["snakemake", "-n", "-p", "-f", "data/binding/hop_counts.parquet"], root).stdout
    assert "rule binding_hop_counts:" in dry and "python -m stages.binding.hop_counts" in dry

    # a typo in the new section is caught up front, naming the key and the schema's fields
    (root / "params.yaml").write_text(params + "\nbinding_hop_counts:\n  splt: test\n")
    check = run([sys.executable, "-m", "emergence", "check"], root, check=False)
    assert check.returncode == 1
    errors = [line for line in check.stderr.splitlines() if line.startswith("error: ")]
    assert_refused(errors, "binding_hop_counts.splt", "split?", rule="known: split")  # the closest key, then all
