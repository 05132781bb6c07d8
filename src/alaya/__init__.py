"""alaya: real-time generative worlds.

Subpackages: ``engine`` (physics world, G-buffer rasterizer, reference renderer),
``data`` (clip contract, datasets, import and inspection).
"""

__version__ = "0.1.0"
