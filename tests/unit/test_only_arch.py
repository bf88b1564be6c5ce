"""bench/only_arch.py: an sdist's setup.py built for one card, as mamba_ssm's and causal-conv1d's
are laid out (pairs at two indents, under version checks)."""

from __future__ import annotations

import sys

from refusals import refuses

from bench.only_arch import main, only_arch

SETUP = """import os
cc_flag = []
if not SKIP:
    cc_flag.append("-gencode")
    cc_flag.append("arch=compute_80,code=sm_80")
    if bare_metal_version >= Version("11.8"):
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_90,code=sm_90")
    if bare_metal_version >= Version("12.8"):
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_100,code=sm_100")
setup(name="pkg", ext_modules=ext_modules)
"""


def test_only_the_cards_pair_is_left_and_nothing_else_changes():
    out = only_arch(SETUP, "90")
    assert 'compute_90,code=sm_90"' in out and "compute_80" not in out and "compute_100" not in out
    assert out.count('cc_flag.append("-gencode")') == 1 and out.count("pass") == 2
    kept = [line for line in SETUP.splitlines() if "cc_flag.append" not in line]
    assert [line for line in out.splitlines() if "cc_flag.append" not in line and "pass" not in line] == kept
    compile(out, "setup.py", "exec")  # still Python: `pass` stands where each pair stood


def test_the_file_is_rewritten_whole(tmp_path):
    # Opening for writing truncates: a script that read the file after that wrote an empty setup.py,
    # and pip then failed with "Exactly one .egg-info should have been produced, but found 0".
    setup = tmp_path / "setup.py"
    setup.write_text(SETUP)
    main([str(setup), "100"])
    assert setup.read_text() == only_arch(SETUP, "100") and 'setup(name="pkg"' in setup.read_text()


def test_a_card_without_a_pair_is_named_and_the_file_left_alone(tmp_path):
    setup = tmp_path / "setup.py"
    setup.write_text(SETUP)
    with refuses(setup, "-gencode", "sm_120", "(it has 80, 90, 100)", error=SystemExit):  # asked for, and found
        main([str(setup), "120"])
    assert setup.read_text() == SETUP
    (tmp_path / "empty.py").write_text("")
    with refuses(tmp_path / "empty.py", "-gencode", "sm_90", "(it has none)", error=SystemExit):
        main([str(tmp_path / "empty.py"), "90"])


def test_each_other_pair_becomes_one_bare_pass_at_the_pairs_indent():
    want = """import os
cc_flag = []
if not SKIP:
    pass
    if bare_metal_version >= Version("11.8"):
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_90,code=sm_90")
    if bare_metal_version >= Version("12.8"):
        pass
setup(name="pkg", ext_modules=ext_modules)
"""
    assert only_arch(SETUP, "90") == want
    assert only_arch(want, "90") == want  # a second run leaves it as it is


def test_the_command_line_gives_the_setup_py_then_the_arch(tmp_path, monkeypatch):
    # python -m bench.only_arch SETUP_PY ARCH: main() with no argv reads both from sys.argv
    setup = tmp_path / "setup.py"
    setup.write_text(SETUP)
    monkeypatch.setattr(sys, "argv", ["bench/only_arch.py", str(setup), "80"])
    main()
    out = setup.read_text()
    assert 'compute_80,code=sm_80"' in out and "compute_90" not in out and "compute_100" not in out
