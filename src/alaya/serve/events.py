"""What a browser may send over its WebSocket: validated input events (pydantic).

Every message is one JSON object with a ``type``; anything else is refused with a message that
names the field at fault, and the session goes on. ``GET /schema`` serves the JSON schema.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from alaya.engine.styles import STYLE_NAMES

CHANNELS = ("none", "reference", "albedo", "normal", "depth", "roughness", "metallic", "material",
            "instance", "motion")
ACTIONS = ("push", "throw", "spawn")
MAX_PROMPT_CHARS = 200


Axis = Annotated[float, Field(ge=-1, le=1)]       # a held key or a mouse motion, in [-1, 1]


class _Event(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextEvent(_Event):
    """An event of free text from the player, 1 to ``MAX_PROMPT_CHARS`` characters; each
    subclass names its ``type``."""
    type: str
    text: str = Field(min_length=1, max_length=MAX_PROMPT_CHARS)


class Move(_Event):
    """Held movement, relative to the view: each axis in [-1, 1] (keys down/up)."""
    type: Literal["move"]
    forward: Axis = 0.0
    strafe: Axis = 0.0
    up: Axis = 0.0


class Look(_Event):
    """Turn the camera by radians (mouse motion)."""
    type: Literal["look"]
    dyaw: Axis = 0.0
    dpitch: Axis = 0.0


class Action(_Event):
    type: Literal["action"]
    name: Literal[ACTIONS]  # type: ignore[valid-type]


class Prompt(TextEvent):
    """Any free-text look, from the next frame on."""
    type: Literal["prompt"]


class Style(_Event):
    """One of the named reference styles (its first phrasing becomes the prompt)."""
    type: Literal["style"]
    name: Literal[STYLE_NAMES]  # type: ignore[valid-type]


class View(_Event):
    """What to show beside the generated frame: a G-buffer channel, the reference render, or
    nothing."""
    type: Literal["view"]
    channel: Literal[CHANNELS]  # type: ignore[valid-type]


class Reset(_Event):
    type: Literal["reset"]


Event = Annotated[Union[Move, Look, Action, Prompt, Style, View, Reset], Field(discriminator="type")]
EVENTS = TypeAdapter(Event)


def parse_event(text: str | bytes) -> Move | Look | Action | Prompt | Style | View | Reset:
    """The event in a WebSocket text message; ValueError with a readable reason otherwise."""
    return parse_with(EVENTS, text)


def parse_with(events: TypeAdapter, text: str | bytes):
    """``text`` validated by ``events`` (a union of event models); ValueError naming the fields
    at fault otherwise."""
    try:
        return events.validate_json(text)
    except ValidationError as err:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'message'}: {e['msg']}"
                             for e in err.errors()[:3])
        raise ValueError(f"bad event: {problems}") from None


def schema() -> dict:
    return {"events": EVENTS.json_schema(), "styles": list(STYLE_NAMES), "channels": list(CHANNELS),
            "actions": list(ACTIONS)}
