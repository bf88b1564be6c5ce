"""Visual Dialog v1.0 JSON -> one Parquet row per dialog: the caption's words as w<ENV>, the
question/answer turns as w<LAN> after <Q>/<A> speaker markers; counts as DVC metrics."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import path_of
from emergence.core.io import write_json, write_parquet
from emergence.studies.grounding.visdial import extract_dialogs, visdial_counts, visdial_file


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    source = visdial_file(path_of(params, "visdial_source"))
    dialogs = extract_dialogs(source)
    counts = visdial_counts(source, dialogs)
    write_parquet(dialogs, path_of(params, "visual_dialogs"))
    write_json({**counts, "source": str(source)}, path_of(params, "visual_counts"))


if __name__ == "__main__":
    raise SystemExit(main())
