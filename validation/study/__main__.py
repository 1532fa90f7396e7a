"""``python -m validation.study reproduce …``."""

import sys

from .cli import main

sys.exit(main())
