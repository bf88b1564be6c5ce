"""One package per study: data, analyses and report; a study imports core, interp and itself, never another study."""
