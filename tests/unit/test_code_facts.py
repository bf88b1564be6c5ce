"""What the code digests find in a code file, kept by the file's content: never a stale value."""

from __future__ import annotations

import os
import sys
import textwrap
from dataclasses import astuple
from pathlib import Path

import pytest
from conftest import SOURCES

from emergence.core.code_facts import ENV, FOLDER, facts, imported_modules, parse
from emergence.core.pipeline import import_closure

SOURCE = '''
    """Doc."""
    import torch.nn
    from . import sibling
    from ..core.io import write_text, PipelineError


    def build():
        from emergence.core.models.registry import build_model

        return build_model("lstm", cfg), build_model(name, cfg), registry.build_model("attn_only", cfg)
'''


@pytest.fixture
def checkout(tmp_path, monkeypatch) -> Path:
    """A checkout holding one module file, its facts kept under the checkout's own folder."""
    monkeypatch.delenv(ENV, raising=False)
    path = tmp_path / "src/emergence/studies/x.py"
    path.parent.mkdir(parents=True)
    path.write_text(textwrap.dedent(SOURCE))
    return tmp_path


def kept(root: Path) -> list[Path]:
    return sorted((root / FOLDER).glob("*.json"))


def test_facts_name_the_imports_resolved_against_the_module_and_the_literal_architectures(checkout):
    found = facts(checkout / "src/emergence/studies/x.py", checkout)
    assert found.archs == {"lstm", "attn_only"}
    assert imported_modules(found, "emergence.studies.x", package=False) == {
        "torch.nn",
        "emergence.studies",
        "emergence.studies.sibling",
        "emergence.core.io",
        "emergence.core.io.write_text",
        "emergence.core.io.PipelineError",
        "emergence.core.models.registry",
        "emergence.core.models.registry.build_model",
    }
    # the same imports in a package's __init__ are relative to the package itself
    assert "emergence.studies.x.sibling" in imported_modules(found, "emergence.studies.x", package=True)
    assert found.digest == parse(textwrap.dedent(SOURCE), "x.py").digest


def test_a_syntax_error_names_the_file():
    with pytest.raises(SyntaxError) as e:
        parse("def broken(:\n", "src/emergence/studies/broken.py")
    assert e.value.filename == "src/emergence/studies/broken.py"


def test_facts_are_kept_once_per_content_and_read_back_equal(checkout):
    path = checkout / "src/emergence/studies/x.py"
    first = facts(path, checkout)
    assert len(kept(checkout)) == 1
    os.utime(path, ns=(1, 1))  # the same bytes seen anew (another process): read back from the folder
    assert facts(path, checkout) == first and len(kept(checkout)) == 1


def test_an_edited_file_gets_new_facts_and_its_old_ones_stay_for_its_old_bytes(checkout):
    path = checkout / "src/emergence/studies/x.py"
    before = facts(path, checkout)
    path.write_text(path.read_text().replace('"lstm"', '"mamba2"') + "\nimport numpy\n")
    after = facts(path, checkout)
    assert after.archs == {"mamba2", "attn_only"} and after.digest != before.digest
    assert "numpy" in imported_modules(after, "emergence.studies.x", package=False)
    assert len(kept(checkout)) == 2


def test_an_edit_that_keeps_the_time_stamp_but_not_the_size_gets_new_facts(checkout):
    """Within one process facts are remembered by (file, time stamp, size): a file rewritten within the clock's
    resolution still differs in size."""
    path = checkout / "src/emergence/studies/x.py"
    os.utime(path, ns=(5, 5))
    assert facts(path, checkout).archs == {"lstm", "attn_only"}
    path.write_text(path.read_text().replace('"lstm"', '"transformer"'))
    os.utime(path, ns=(5, 5))
    assert facts(path, checkout).archs == {"transformer", "attn_only"}


def test_a_garbled_entry_is_computed_again_and_rewritten(checkout):
    path = checkout / "src/emergence/studies/x.py"
    good = facts(path, checkout)
    (entry,) = kept(checkout)
    entry.write_text('{"imports": [[0, "torch"')
    os.utime(path, ns=(2, 2))
    assert facts(path, checkout) == good
    assert entry.read_text().startswith('{"imports"') and entry.read_text().endswith("}")


def test_an_entry_is_what_is_read_for_those_bytes(checkout):
    """The key is the content: an entry kept for these bytes is used as it is (so it must never be wrong)."""
    path = checkout / "src/emergence/studies/x.py"
    facts(path, checkout)
    (entry,) = kept(checkout)
    entry.write_text('{"imports": [[0, "kept_only", []]], "archs": ["kept"], "digest": "d"}')
    os.utime(path, ns=(3, 3))
    found = facts(path, checkout)
    assert found.archs == {"kept"} and found.digest == "d"
    assert imported_modules(found, "emergence.studies.x", package=False) == {"kept_only"}


def test_the_folder_can_be_named_and_an_unwritable_one_only_keeps_nothing(checkout, tmp_path, monkeypatch):
    path = checkout / "src/emergence/studies/x.py"
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setenv(ENV, str(elsewhere))
    named = facts(path, checkout)
    assert len(list(elsewhere.glob("*.json"))) == 1 and not (checkout / FOLDER).exists()
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setenv(ENV, str(blocked / "facts"))  # under a file: cannot be made
    assert facts(path, checkout) == named


def test_the_closure_is_the_same_walked_alone_or_after_others():
    """`known` carries one walk's findings to the next: a module's closure does not depend on what came first."""
    modules = ["stages.binding.ablation", "stages.grounding.lens", "emergence.core.train.loop"]
    known: dict = {}
    shared = [import_closure(m, SOURCES, known) for m in modules]
    assert shared == [import_closure(m, SOURCES) for m in modules]
    assert len({tuple(c) for c in shared}) == 3


def test_facts_found_by_other_extracting_code_are_kept_apart(checkout, tmp_path, monkeypatch):
    """The key holds this module's own source: facts an older version of it found are never read."""
    import importlib.util

    import emergence.core.code_facts as current

    edited = tmp_path / "code_facts_edited.py"
    edited.write_text(Path(current.__file__).read_text() + "\n# edited\n")
    spec = importlib.util.spec_from_file_location("code_facts_edited", edited)
    other = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "code_facts_edited", other)  # its dataclass looks itself up there
    spec.loader.exec_module(other)
    path = checkout / "src/emergence/studies/x.py"
    assert astuple(other.facts(path, checkout)) == astuple(facts(path, checkout))
    assert len(kept(checkout)) == 2


def test_a_failed_write_leaves_no_temporary_file(checkout, monkeypatch):
    def full_disk(*_):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("emergence.core.code_facts.os.replace", full_disk)
    found = facts(checkout / "src/emergence/studies/x.py", checkout)
    assert found.archs == {"lstm", "attn_only"}
    assert list((checkout / FOLDER).iterdir()) == []
