"""`python -m langchain_contextkit.cli`: the `contextkit` command."""

import sys

from langchain_contextkit.cli import main

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
