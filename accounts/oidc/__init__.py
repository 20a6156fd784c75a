"""allauth's ``openid_connect`` provider, specialised: merged claims, strict ``email_verified``,
and the raw ID token kept for RP-initiated logout."""
