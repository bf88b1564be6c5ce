"""Fault cases of the input readers and the commands around them, each in a copy of the tiny run: a
transcript that links to itself, images skipped by dino_features, a corpus where the child never speaks,
a DVC remote that never answers, and paths as users write them (a folder name with a space, `~/...`)."""

from __future__ import annotations

import shlex
import shutil

import pandas as pd
import pytest
from conftest import ROOT
from faults import assert_only_changed, assert_outcome, fault_copy, run_command, set_params, snapshot
from refusals import assert_names
from tcp_server import tcp_server

CHAT = "data/grounding/chat"
SCENE_IMAGES = "data/visual/scenes/images"
# `make` in a copy: the venv is this checkout's, taken as installed (-o: never rebuilt from a copy)
MAKE = ("make", "--no-print-directory", "-o", ".venv/.installed")


def line_naming(proc, start: str, says: str) -> str:
    """The first line of stderr that holds `start` (error:, warning: ...) and names `says`."""
    lines = [line for line in proc.stderr.splitlines() if start in line and says in line]
    assert lines, f"no {start!r} line names {says!r}:\n{proc.stderr[-3000:]}"
    return lines[0]


def test_a_transcript_linking_to_itself_is_one_line_naming_it(tiny_run, tmp_path):
    root = fault_copy(tiny_run, tmp_path / "run")
    (root / CHAT / "loop.cha").symlink_to("loop.cha")
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.grounding.childes_extract")
    assert_outcome(proc, "error", f"{CHAT}/loop.cha: ")
    assert_names(line_naming(proc, "error: ", f"{CHAT}/loop.cha: "), "symbolic link")  # the cause
    assert_only_changed(root, before)


def test_skipped_images_are_left_out_of_every_later_stage_to_the_report(tiny_run, tmp_path):
    """dino_features.skip_bad_images, as its error advises: the visual stages run through to the report, the
    skipped image's dialogs in none of them."""
    root = fault_copy(tiny_run, tmp_path / "run")
    images = shutil.copytree(root / SCENE_IMAGES, root / "data/user/images")  # a user's own images
    bad = sorted(images.iterdir())[1]
    bad.write_bytes(b"not a png")  # the cache is keyed by content: this one is read, and fails
    bad_id = int(bad.stem)
    set_params(root, paths__visual_images="data/user/images")
    set_params(root, dino_features__skip_bad_images=True)
    set_params(root, visual_runs__settings=["image"])  # the setting that reads images; half the stages
    before = snapshot(root)
    proc = run_command(root, "dvc", "repro", "visual_report")
    # the dialogs dropped, by the key that skipped their image; and the image skipped, by its file
    assert_outcome(proc, "warning", f"dino_features.skip_bad_images: image_id {bad_id}")
    assert_names(line_naming(proc, "warning: dino_features: ", bad.name), "1 image(s)", "skip_bad_images")
    encoded = pd.read_parquet(root / "data/visual/features/images.parquet")
    eval_set = pd.read_parquet(root / "data/visual/eval.parquet")
    assert bad_id not in set(encoded["image_id"]) and len(encoded) == len(list(images.iterdir())) - 1
    assert bad_id not in set(eval_set["image_id"]) and all(bad_id not in o for o in eval_set["other_images"])
    page = root / "reports/grounding_visual.html"
    assert page.stat().st_mtime > bad.stat().st_mtime and bad.name in page.read_text()  # its encoder table
    assert_only_changed(
        root,
        before,
        (
            "data/visual",
            "data/cache",
            "reports/grounding_visual.html",
            "reports/metrics/grounding_visual.json",
            "dvc.lock",
            "data/code",  # the caption instances' code digests go with the caption setting
        ),
    )


def test_a_transcript_without_child_speech_warns_and_the_report_says_so(tiny_run, tmp_path):
    root = fault_copy(tiny_run, tmp_path / "run")
    first = sorted((root / CHAT).glob("*.cha"))[0].read_text().splitlines()
    header = first[: first.index(next(line for line in first if line.startswith("*")))]
    (root / CHAT / "mother_only.cha").write_text("\n".join(header + ["*MOT:\tlook , a ball .", "@End", ""]))
    before = snapshot(root)
    proc = run_command(root, "python", "-m", "stages.grounding.childes_extract")
    assert_outcome(proc, "warning", "mother_only.cha")
    assert_names(line_naming(proc, "warning: ", "mother_only.cha"), "1 of 4", "*CHI:")
    proc = run_command(root, "python", "-m", "stages.grounding.report")
    assert_outcome(proc, "ok")
    page = (root / "reports/grounding.html").read_text()
    assert "Warning: 1 of the 4 transcripts have no child speech (no *CHI: line)" in page
    assert_only_changed(
        root,
        before,
        (
            "data/grounding/turns.parquet",
            "reports/metrics/childes_counts.json",
            "reports/grounding.html",
            "reports/metrics/grounding.json",
            "reports/plots/grounding.csv",
        ),
    )


def test_make_pull_from_a_server_that_never_answers_says_what_it_waits_for_then_stops(tiny_run, tmp_path):
    root = fault_copy(tiny_run, tmp_path / "run")
    with tcp_server(None) as port:
        run_command(root, "dvc", "remote", "modify", "--local", "shared", "url", f"ssh://127.0.0.1:{port}/store")
        before = snapshot(root)
        proc = run_command(root, *MAKE, "pull", timeout=60)  # it stops by itself: a hang fails here
    # the remote (name and URL), the address, what it did not do and the time it was given
    remote = f"DVC remote 'shared' (ssh://127.0.0.1:{port}/store): "
    assert_outcome(proc, "error", remote)
    assert_names(line_naming(proc, "error: ", remote), f"127.0.0.1:{port}", "greeting", "10 s")
    assert_names(line_naming(proc, remote, "waiting"), f"127.0.0.1:{port}")  # said while it waited
    assert_only_changed(root, before)


def test_make_runs_in_a_checkout_whose_path_has_a_space(tiny_run, tmp_path):
    root = fault_copy(tiny_run, tmp_path / "my projects" / "run")
    dry = run_command(root, *MAKE, "-n", "repro", "snakemake", "test", "unit", "bench")
    assert dry.returncode == 0, dry.stderr
    path_words = [word for line in dry.stdout.splitlines() for word in shlex.split(line) if word.startswith("PATH=")]
    assert len(path_words) == 5 and set(path_words) == {f"PATH={root}/.venv/bin:$PATH"}, dry.stdout
    # really run: `make unit`, collecting one test file only
    one_file = "--collect-only -p no:cacheprovider tests/unit/test_io.py"
    unit = run_command(root, *MAKE, "unit", env={"PYTEST_ADDOPTS": one_file})
    assert unit.returncode == 0 and "test_io.py" in unit.stdout, unit.stdout[-2000:] + unit.stderr[-2000:]
    assert_outcome(run_command(root, *MAKE, "check"), "ok")


def test_a_home_shorthand_path_stops_make_repro_before_dvc_deletes_anything(tiny_run, tmp_path):
    """DVC deletes a stage's outputs before it runs the stage: the `~` must be refused by the check that
    `make repro` runs first, leaving the last run's artifacts as they were."""
    root = fault_copy(tiny_run, tmp_path / "run")
    set_params(root, paths__childes_source="~/corpora/childes")
    before = snapshot(root)
    proc = run_command(root, *MAKE, "repro", env={"HOME": str(tmp_path / "home")}, timeout=300)
    # the key, its value, and the full path to write instead
    assert_outcome(proc, "error", "paths.childes_source: '~/corpora/childes'")
    assert_names(line_naming(proc, "error: ", "paths.childes_source: "), f"'{tmp_path}/home/corpora/childes'")
    assert_only_changed(root, before)


@pytest.mark.parametrize("target", ["reports", "data", "."])
def test_export_force_never_replaces_the_checkouts_own_folders(tiny_run, tmp_path, target):
    root = fault_copy(tiny_run, tmp_path / "run")
    before = snapshot(root)
    cmd = ("python", "-m", "emergence", "export", "data/binding/runs/seed0", "--to", "hf", target, "--force")
    assert_outcome(run_command(root, *cmd, timeout=300), "error", target)
    assert_only_changed(root, before)


def test_the_unit_tests_collect_without_the_shared_data_and_say_what_is_missing(tmp_path):
    env = {"EMERGENCE_SHARED": str(tmp_path / "no-shared")}
    collect = run_command(ROOT, "python", "-m", "pytest", "-q", "--co", "-m", "not pipeline", "tests/unit", env=env)
    assert collect.returncode == 0 and "Traceback" not in collect.stdout, collect.stdout[-2000:]
    proc = run_command(
        ROOT, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/unit/test_childes.py", env=env
    )
    assert proc.returncode != 0 and f"{tmp_path / 'no-shared' / 'data'} is missing" in proc.stdout, proc.stdout[-2000:]
