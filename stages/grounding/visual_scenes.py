"""Write the visual-grounding default: synthetic scenes (PNG) with captions and question/answer
dialogues, in Visual Dialog v1.0 JSON, so the real VisDial reader and DINOv2 stage run on them."""

from __future__ import annotations

from emergence.core.cli import stage_main, start_stage
from emergence.core.config import from_dict, path_of, section
from emergence.studies.grounding.nouns import read_nouns
from emergence.studies.grounding.scenes import SceneParams, write_scenes


@stage_main
def main(argv: list[str] | None = None) -> None:
    _, params = start_stage(__doc__, argv)
    p = from_dict(SceneParams, section(params, "visual_scenes"), "visual_scenes")
    nouns = read_nouns(path_of(params, "grounding_nouns"))
    write_scenes(path_of(params, "visual_scenes"), p, nouns, where="visual_scenes")


if __name__ == "__main__":
    raise SystemExit(main())
