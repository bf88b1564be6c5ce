"""Held-out dialogs of the visual-dialogue study, cut before the first v<LAN> whose caption names v.

Caption setting: the context keeps the caption (v<ENV>); mismatched contexts swap
in other targets' u<ENV>. Image setting: the same dialogue without its caption;
mismatched contexts pair it with n_mismatched images whose captions lack v.
"""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_parquet
from emergence.studies.grounding import visual_inputs as inputs
from emergence.studies.grounding.tokens import EvalParams, evaluation_set
from emergence.studies.grounding.visual_data import other_images, without_env


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(EvalParams, section(params, "visual_eval"), "visual_eval")
    dialogs = inputs.dialogs(params)
    targets, _ = inputs.vocab_index(params)
    table = evaluation_set(
        dialogs, targets, p, "visual_eval", str(path_of(params, "visual_dialogs")), max_len=inputs.seq_len(params)
    )
    table["image_id"] = dialogs["image_id"].to_numpy()[table["turn"].to_numpy()]
    table["image_context"] = table["context"].map(without_env)
    table["other_images"] = other_images(dialogs, table, p.n_mismatched, p.seed)
    write_parquet(table, path_of(params, "visual_eval"))


if __name__ == "__main__":
    raise SystemExit(main())
