"""Interactive sessions (JupyterLab, VS Code) as JupyterHub named servers
(docs/decisions.md#sessions-are-jupyterhub-named-servers)."""
