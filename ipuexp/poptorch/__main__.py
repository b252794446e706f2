"""``python -m ipuexp.poptorch``: run a PopTorch script on ipuexp (see ``ipuexp.poptorch.cli``)."""
from ipuexp.poptorch.cli import main

if __name__ == "__main__":
    main()
