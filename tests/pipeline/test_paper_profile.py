"""The binding study's paper profile: one switch gives the paper's configuration; at tiny width it runs."""

from __future__ import annotations

import json
import sys

import pandas as pd
import yaml
from conftest import project_copy, run

from emergence.core.config import read_params
from emergence.studies.binding.sets import load_data_params
from emergence.studies.binding.train_config import train_params


def test_paper_profile_is_the_paper_and_trains_at_tiny_width_on_cpu(tmp_path):
    root = project_copy(tmp_path, profile="paper")
    params = read_params(root / "params.yaml")
    data, programs = load_data_params(params)
    fmt, _, stream, cfg = train_params(params, seed=0, device="cuda")
    model = params["binding_model"]
    # the paper (summary we have): 12 layers, 512-d, 500,000 programs, batch 64, AdamW 1e-4,
    # 15 epochs, linear warmup then decay; 16 lines, up to 4 hops, cubic hop weighting
    assert (model["n_layers"], model["d_model"], model["conv_kernel"]) == (12, 512, 0)
    assert (data.n_programs, cfg.batch_size, cfg.lr, cfg.optimizer, cfg.schedule) == (
        500_000,
        64,
        1e-4,
        "adamw",
        "linear",
    )
    assert cfg.warmup_steps > 0 and cfg.steps == round(15 * data.n_programs * data.split[0] / cfg.batch_size)
    assert (programs.distribution, programs.n_lines, programs.max_hops, programs.hop_weight_power) == (
        "paper",
        16,
        4,
        3,
    )
    assert (fmt, stream.on) == ("answer_only", False) and params["base"]["device"] == "cuda"

    # the same profile at tiny width and a few steps, on this CPU
    small = yaml.safe_load((root / "params.yaml").read_text())
    small["base"].update(device="cpu", seeds=[0])
    small["binding_data"].update(n_programs=300, gen_per_cell=1, gen_lines=[2, 4], gen_hops=[1, 2], stress_per_hop=2)
    small["binding_model"].update(d_model=32, n_heads=2, d_head=16, d_mlp=64)
    # eval_programs: the one validation program 300 x 0.002 gives (more is refused, not clipped)
    small["binding_train"].update(steps=4, warmup_steps=1, n_log_checkpoints=2, checkpoint_every=2, eval_programs=1)
    (root / "params.yaml").write_text(yaml.safe_dump(small, sort_keys=False))
    run([sys.executable, "-m", "stages.binding.data"], root)
    run([sys.executable, "-m", "stages.binding.train", "--seed", "0"], root)
    final = root / "data/binding/runs/seed0/step4"
    assert (final / "model.safetensors").is_file()
    assert yaml.safe_load((final / "config.json").read_text())["config"]["n_layers"] == 12
    meta = json.loads((final / "config.json").read_text())["meta"]["train"]
    gpu_settings = (meta["precision"], meta["compile"], meta["compile_mode"])
    assert gpu_settings == ("bf16", True, "reduce-overhead")  # the paper's GPU settings, run on this CPU
    assert pd.read_parquet(root / "data/binding/runs/seed0/metrics.parquet")["step"].max() >= 3
