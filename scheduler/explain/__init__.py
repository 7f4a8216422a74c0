"""``kube-py-scheduler explain`` and the daemon's own diagnosis of its pending pods.

Answering "why is my pod Pending?" for a live cluster with the daemon's plugins and config:
``engine`` runs one pod's cycle over every node of a snapshot built the daemon's way
(``cluster``), ``render`` prints it for people or in kube-scheduler-simulator's keys, ``cli``
is the command.  ``diagnoses`` keeps, inside the daemon, the last attempt of each pending
pod, and ``debug`` serves it and the queue on ``/debug/*`` and logs a dump on SIGUSR2.
"""
