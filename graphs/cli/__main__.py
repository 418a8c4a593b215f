"""``python -m graphs.cli``: the same as the ``taskctx`` command."""

from . import main

main()
