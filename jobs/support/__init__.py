"""Support bundles: one zip of what a support person needs about one job or session
(:mod:`.bundle` makes it from what :mod:`.gather` reads)."""
