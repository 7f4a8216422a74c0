"""The command line: ``kube-py-scheduler run | sandbox | bench | podgroup-controller |
completion``.

The top layer: one argparse parser (``main.build_parser``) with one handler per subcommand
(a ``common.Command`` per module).  Everything that can be wrong with the configuration
(flags, the config file, plugin args) is reported before the first request reaches the
cluster, with exit status 2 (``scheduler.exit_codes``).  Tools that drive the daemon
(``--sandbox`` wiring, the bench) are wired here, so the daemon never imports them.
"""

from scheduler.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
