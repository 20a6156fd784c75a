"""Users, their OIDC identity (issuer + sub) and the login rules of the portal."""
