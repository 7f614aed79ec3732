import sys

from sync_lint.cli import main

sys.exit(main())
