"""Controllers that run beside the scheduler (not plugins): they reconcile objects' status.

As scheduler-plugins keeps ``pkg/controllers/`` apart from its plugins.  Each is started by
the daemon (``scheduler.app``) while it leads, or alone from the CLI.  Modules are imported
only when run (the PodGroup controller loads kopf).
"""
