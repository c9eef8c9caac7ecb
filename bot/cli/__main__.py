"""`python -m bot.cli`: the same as the `bot` command."""

import sys

from bot.cli import main

sys.exit(main())
