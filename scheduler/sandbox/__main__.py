"""``python -m scheduler.sandbox``."""

import sys

from .cli import main

sys.exit(main())
