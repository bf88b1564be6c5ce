"""Write the association study's embedded default corpus: generated TinyStories-style stories."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.studies.assoc.stories import StoryConfig, generate_stories, write_stories


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    cfg = from_dict(StoryConfig, section(params, "assoc_stories"), "assoc_stories")
    write_stories(generate_stories(cfg), path_of(params, "assoc_stories"))


if __name__ == "__main__":
    raise SystemExit(main())
