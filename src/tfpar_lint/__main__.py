import sys

from tfpar_lint.cli import main

sys.exit(main())
