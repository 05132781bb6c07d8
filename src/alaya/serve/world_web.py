"""``alaya play --world``: the play page and server (``alaya.serve.web``) with no engine.

Each player's session is a :class:`~alaya.runtime.world_session.WorldSession`: the world model
predicts every frame from the frames before it and an action row (``alaya.data.actions``). The
loop's input thread (``RealtimeLoop``'s engine thread) ticks an :class:`ActionStream` at the
target fps; each tick is one action row, and the model thread plays it, ``session.step(row)``,
giving the next frame, which goes out as in the engine mode (16-byte header + JPEG).

A row is the held navigation (keys), plus the mouse's turn/pitch since the last tick, plus at
most one queued one-shot action (jump, attack, spell, summon). Free text ("cast a fireball")
becomes a one-shot action through :class:`~alaya.data.actions.ActionText`; the reply names the
action it became, or the error. A player starts from the first start frame; each reset moves to
the next one (``load_start_frames``, cycling).

Events (``GET /schema``): ``{"type": "move", "forward", "strafe", "turn", "pitch"}`` (each in
[-1, 1], held until changed; turn + is left, pitch + is up), ``{"type": "look", "turn",
"pitch"}`` (one tick, added to the held values and clipped), ``{"type": "action", "name":
"jump"|"attack"|"spell"|"summon"}``, ``{"type": "do", "text": "cast a fireball"}``, and as in
the engine mode ``prompt``, ``style`` and ``reset``.
"""

from __future__ import annotations

from collections import deque
from typing import Annotated, Literal, Union

import numpy as np
from fastapi import FastAPI
from pydantic import Field, TypeAdapter

from alaya.data.actions import ONE_SHOT, ActionText, action_vector
from alaya.engine.styles import STYLE_NAMES
from alaya.runtime.loop import RealtimeLoop
from alaya.serve.events import Axis, Prompt, Reset, Style, TextEvent, _Event, parse_with
from alaya.serve.web import Game, Player, PromptSwitch, WebConfig, create_game_app, prompt_text


class Move(_Event):
    """Held navigation (keys), each in [-1, 1]."""
    type: Literal["move"]
    forward: Axis = 0.0
    strafe: Axis = 0.0
    turn: Axis = 0.0
    pitch: Axis = 0.0


class Look(_Event):
    """Mouse motion: added to the held turn and pitch for one tick."""
    type: Literal["look"]
    turn: Axis = 0.0
    pitch: Axis = 0.0


class Act(_Event):
    type: Literal["action"]
    name: Literal[ONE_SHOT]  # type: ignore[valid-type]


class Do(TextEvent):
    """Free text naming a one-shot action ("cast a fireball" -> spell)."""
    type: Literal["do"]


WORLD_EVENTS = TypeAdapter(Annotated[Union[Move, Look, Act, Do, Prompt, Style, Reset], Field(discriminator="type")])


class ActionStream:
    """The input side of one world session; its methods run on the loop's input thread only."""

    def __init__(self, max_queued: int = 8):
        self.held = np.zeros(4, np.float32)               # forward, strafe, turn, pitch
        self.nudge = np.zeros(2, np.float32)              # turn, pitch from the mouse since the last tick
        self.queued: deque[str] = deque(maxlen=max_queued)

    def hold(self, forward: float, strafe: float, turn: float, pitch: float) -> None:
        self.held[:] = (forward, strafe, turn, pitch)

    def look(self, turn: float, pitch: float) -> None:
        self.nudge += (turn, pitch)

    def act(self, name: str) -> None:
        self.queued.append(name)

    def step(self) -> np.ndarray:
        """The action row (8,) for the next frame."""
        nav = self.held.copy()
        nav[2:] = np.clip(nav[2:] + self.nudge, -1.0, 1.0)
        self.nudge[:] = 0
        act = self.queued.popleft() if self.queued else None
        return action_vector(*(float(v) for v in nav), act=act)


def create_world_app(factory, starts: list[np.ndarray], config: WebConfig | None = None,
                     actions: ActionText | None = None, depths: list[np.ndarray | None] | None = None,
                     views: list[np.ndarray | None] | None = None) -> FastAPI:
    """The world mode: ``factory`` is a :class:`~alaya.runtime.world_factory.WorldSessionFactory`,
    ``starts`` its start frames (uint8 (size, size, 3)), ``depths`` their recorded depths
    (``load_start_depths``; None: a memory model predicts them), ``views`` their recorded cameras
    (``load_start_views``: a session with a walkable region stays in it), ``actions`` the text
    resolver (default: one over the factory's prompt encoder)."""
    if not starts:
        raise ValueError("the world mode needs at least one start frame")
    depths = list(depths) if depths is not None else [None] * len(starts)
    if len(depths) != len(starts):
        raise ValueError(f"depths: one per start frame expected ({len(starts)}), got {len(depths)}")
    views = list(views) if views is not None else [None] * len(starts)
    if len(views) != len(starts):
        raise ValueError(f"views: one per start frame expected ({len(starts)}), got {len(views)}")
    cfg = config or WebConfig()
    actions = actions or ActionText(factory.prompt_encoder)

    def new_player() -> Player:
        session = factory.new(cfg.prompt, cfg.seed)
        session.reset(starts[0], depth=depths[0], view=views[0])
        stream, state, prompts = ActionStream(), {"start": 0}, PromptSwitch(session.prompt_encoder)

        def handle(event, rt: RealtimeLoop) -> dict | None:
            if isinstance(event, Move):
                rt.engine_command(lambda s: s.hold(event.forward, event.strafe, event.turn, event.pitch))
            elif isinstance(event, Look):
                rt.engine_command(lambda s: s.look(event.turn, event.pitch))
            elif isinstance(event, (Act, Do)):
                name = event.name if isinstance(event, Act) else actions.resolve(event.text)  # ActionError
                rt.engine_command(lambda s: s.act(name))
                if isinstance(event, Do):
                    return {"type": "do", "text": event.text, "action": name}
            elif isinstance(event, (Prompt, Style)):
                prompts.request(prompt_text(event), rt)
            elif isinstance(event, Reset):
                state["start"] = (state["start"] + 1) % len(starts)
                i = state["start"]
                rt.model_command(lambda s, frame=starts[i], depth=depths[i], view=views[i]:
                                 s.reset(frame, depth=depth, view=view))
            return None

        return Player(session, lambda: stream, handle)

    schema = {"events": WORLD_EVENTS.json_schema(), "styles": list(STYLE_NAMES), "channels": [],
              "actions": list(ONE_SHOT)}
    return create_game_app(Game("world", factory.size, schema,
                                lambda raw: parse_with(WORLD_EVENTS, raw), new_player), cfg)
