"""A plugin module that calls ``sys.exit`` at import."""

import sys

sys.exit(3)
