"""``python -m scheduler`` is ``kube-py-scheduler``."""

import sys

from scheduler.cli import main

sys.exit(main())
