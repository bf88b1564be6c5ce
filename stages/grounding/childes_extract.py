"""CHAT transcripts (a .cha file, a directory or a CHILDES .zip) -> one Parquet row per turn.

Speech words become w<LAN> tokens, %sit/%act/%gpx words w<ENV> tokens, ordered
speaker, situation, <bef> events, events, utterance, <aft> events.
"""

from __future__ import annotations

import sys

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.core.io import write_json, write_parquet
from emergence.studies.grounding.childes import CHILD, ExtractParams, extract_turns, turn_counts, without_child


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(ExtractParams, section(params, "childes_extract"), "childes_extract")
    source = path_of(params, "childes_source")
    turns = extract_turns(source, split_compounds=p.split_compounds, limits=p)
    silent = without_child(turns)
    counts = {
        **turn_counts(source, limits=p),
        "files": int(turns["file"].nunique()),
        "env_tokens": int(turns["env"].map(len).sum()),
        "lan_tokens": int(turns["lan"].map(len).sum()),
        "speakers": sorted(turns["speaker"].unique().tolist()),
        "source": str(source),
        "child_utterances": int((turns["speaker"] == CHILD).sum()),
        "files_without_child": len(silent),  # the report page warns when it is not 0
    }
    if silent:
        print(
            f"warning: {source}: {len(silent)} of {counts['files']} transcript(s) have no child speech "
            f"(no *{CHILD}: line), e.g. {silent[0]}",
            file=sys.stderr,
        )
    write_parquet(turns, path_of(params, "childes_turns"))
    write_json(counts, path_of(params, "childes_counts"))


if __name__ == "__main__":
    raise SystemExit(main())
