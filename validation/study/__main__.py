"""``python -m validation.study reproduce …``."""

import sys

from validation.cli.study import main

sys.exit(main())
