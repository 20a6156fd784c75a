"""Settings split: ``base`` (shared), ``dev``, ``test`` and ``production``."""
