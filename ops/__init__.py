"""Operations for the site's staff: the cluster page (nodes, partitions, reservations from the
snapshot), draining and resuming nodes, maintenance reservations, announcements."""
