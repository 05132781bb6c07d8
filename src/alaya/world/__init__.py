"""The world model as an environment: ``WorldModelEnv`` (Gymnasium), registered on import as
``alaya/WorldModel-v0`` (``gymnasium.make("alaya/WorldModel-v0", weights=...)``)."""

import gymnasium

from alaya.world.env import ENV_ID, WorldModelEnv, soft_action

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="alaya.world.env:WorldModelEnv")

__all__ = ["ENV_ID", "WorldModelEnv", "soft_action"]
