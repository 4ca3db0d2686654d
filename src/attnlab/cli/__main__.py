"""``python -m attnlab.cli ARGS``: the ``attnlab`` command."""

import sys

from attnlab.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
