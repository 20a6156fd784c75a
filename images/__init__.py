"""Site-curated container images: the registry admins keep, what the cluster holds of each
(read by a periodic check, not per page view), and the check a request's image goes through."""
