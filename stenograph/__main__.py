"""``python -m stenograph``."""

import sys

from .cli import main

sys.exit(main())
