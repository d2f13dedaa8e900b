"""``python -m webtier.embedded DATA_DIR PORT``: the keeper (see
:mod:`webtier.embedded.keeper`), as :func:`~webtier.embedded.keeper.launch`
starts it."""

import sys

from webtier.embedded.keeper import main

sys.exit(main(sys.argv[1:]))
