"""The process exit codes, defined once for the CLI, the daemon and every subcommand."""

from __future__ import annotations

EXIT_OK = 0
# A failure while running (the API connection could not be configured, the loop crashed).
EXIT_FAILURE = 1
# Bad usage or configuration, reported before anything touches the cluster.
EXIT_USAGE = 2
# The leader lease was lost: exit so Kubernetes restarts the process as a standby.
EXIT_LOST_LEASE = 3
