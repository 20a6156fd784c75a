"""The GPU portal's JupyterHub extensions: :mod:`.spawner` (PortalSlurmSpawner) and :mod:`.api`
(the port-only batchspawner callback)."""
