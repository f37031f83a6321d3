import sys

from .th.cli import main

sys.exit(main())
