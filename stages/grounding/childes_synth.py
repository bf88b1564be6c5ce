"""Write the grounding study's embedded default: synthetic caregiver-child CHAT transcripts."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.studies.grounding.childes_synth import SynthConfig, write_sessions
from emergence.studies.grounding.nouns import read_nouns


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    cfg = from_dict(SynthConfig, section(params, "childes_synth"), "childes_synth")
    write_sessions(cfg, read_nouns(path_of(params, "grounding_nouns")), path_of(params, "childes_synth"))


if __name__ == "__main__":
    raise SystemExit(main())
