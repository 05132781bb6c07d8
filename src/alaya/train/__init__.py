"""Training: the loop every model shares (``loop.py``, with ``checkpoint``, ``plots`` and
``distributed``) and the recipes that sit on it: the teacher, the Flash student's stages, the
world model (``world_data``: its episodes in memory) and the guided decoder."""
