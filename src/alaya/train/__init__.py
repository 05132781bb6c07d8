"""One training loop for every model of the project (see ``loop.py``)."""
