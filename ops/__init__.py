"""Operations for the site's staff (issue 21): the cluster page (nodes, partitions, reservations from the
snapshot), draining and resuming nodes, maintenance reservations, announcements."""
