"""Interactive sessions (JupyterLab, VS Code) as JupyterHub named servers (design decision 6)."""
