"""``python -m ipuexp.recipes``: published configurations as recipes (``import``) and what a file holds (``list``)."""
