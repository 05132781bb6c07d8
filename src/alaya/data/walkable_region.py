"""Where a recorded player can stand: the smallest rectangle, on the floor (world x, y; z is up),
around every camera centre in a dataset's recordings, in the recordings' own world frame.

Why: a world session's camera stops at the surfaces its frames show (``slide_at_surfaces``), but a
frame only shows what the model drew. Where it draws open ground in place of a wall it has not
seen (a turn towards an unseen border), the camera walks on, out of the world every recording was
made in, onto ground no frame of the data shows; there its frames are all guesses and they fall
apart. The recordings say how far players can go. A session that knows its start camera's pose in
the recordings' world (``starts/NN_*.view.npy``, written beside each start frame) keeps its
camera inside the region: a walk that would leave it slides along its edge instead, as a game's
collision slides a player along a wall.

The region is the minimum-area rectangle around the centres (at any rotation), not their convex
hull: players seldom reach a world's corners, and the hull of 63 recorded episodes cut the arena's
corners by up to a metre, where the game's own player walks (a test scene's `walk_back` went
0.37 m beyond it). A world with holes, corridors or round walls is over-approximated: the region
never stops a walk the recordings made, it only bounds the world. The recordings of one dataset must
share a world frame (true of one game's procedural arenas; episodes without ``world_to_camera``
give no region, and a session without one walks freely).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from alaya.io import atomic_path

REGION_FILE = "region.json"
EDGE_SLACK = 1e-3          # metres: a start this close outside the region is on its edge (``walk``)


class FlatRegionError(ValueError):
    """Floor positions that bound no area: fewer than 3 distinct, or all on one line."""


def cross2(a, b):
    """The z of the cross product of 2-D vectors (..., 2)."""
    a, b = np.asarray(a), np.asarray(b)
    return a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]


def convex_hull(points: np.ndarray) -> np.ndarray:
    """(N, 2) points -> (M, 2) the vertices of their convex hull, counter-clockwise, no three
    on a line (Andrew's monotone chain; a vertex that turns by under 1e-6 m² is dropped)."""
    pts = np.unique(np.asarray(points, np.float64).reshape(-1, 2), axis=0)
    if len(pts) < 3:
        raise FlatRegionError(f"points: a region needs at least 3 distinct floor positions, got {len(pts)}")

    def chain(seq):
        out: list[np.ndarray] = []
        for p in seq:
            while len(out) >= 2 and cross2(out[-1] - out[-2], p - out[-2]) <= 1e-6:
                out.pop()
            out.append(p)
        return out[:-1]

    hull = np.array(chain(pts) + chain(pts[::-1]))
    turns = cross2(hull - np.roll(hull, 1, 0), np.roll(hull, -1, 0) - hull)
    hull = hull[turns > 1e-6]                    # where the two chains meet on a straight edge
    if len(hull) < 3:
        raise FlatRegionError("points: the floor positions lie on one line; they bound no region")
    return hull


def bounding_rectangle(points: np.ndarray) -> np.ndarray:
    """(N, 2) points -> (4, 2) the corners, counter-clockwise, of the minimum-area rectangle
    around them (one of its sides lies along an edge of their convex hull)."""
    hull = convex_hull(points)
    best = None
    for edge in np.roll(hull, -1, 0) - hull:
        u = edge / np.linalg.norm(edge)
        v = np.array([-u[1], u[0]])
        a, b = hull @ u, hull @ v
        area = (a.max() - a.min()) * (b.max() - b.min())
        if best is None or area < best[0] - 1e-12:
            best = area, u, v, (a.min(), a.max()), (b.min(), b.max())
    _, u, v, (a0, a1), (b0, b1) = best
    return np.array([a0 * u + b0 * v, a1 * u + b0 * v, a1 * u + b1 * v, a0 * u + b1 * v])


@dataclass(frozen=True)
class WalkableRegion:
    """A convex polygon ``hull`` (M, 2), counter-clockwise, on the floor of a recordings' world
    (``from_cameras``: a rectangle)."""
    hull: np.ndarray

    def __post_init__(self):
        h = np.asarray(self.hull, np.float64)
        if h.ndim != 2 or h.shape[1] != 2 or len(h) < 3 or not np.isfinite(h).all():
            raise ValueError(f"hull: expected finite (M >= 3, 2) vertices, got shape {h.shape}")
        edges = np.roll(h, -1, 0) - h
        turns = cross2(edges, np.roll(edges, -1, 0))
        if (turns < -1e-9).any() or turns.sum() <= 1e-9:
            raise ValueError("hull: vertices are not a convex polygon in counter-clockwise order")
        object.__setattr__(self, "hull", h)

    @classmethod
    def from_cameras(cls, world_to_camera) -> "WalkableRegion":
        """The smallest rectangle around the centres of cameras (..., 4, 4) world-to-camera (z up)."""
        m = np.asarray(world_to_camera, np.float64).reshape(-1, 4, 4)
        centres = -np.einsum("nji,nj->ni", m[:, :3, :3], m[:, :3, 3])
        return cls(bounding_rectangle(centres[:, :2]))

    def _edges(self):
        a = self.hull
        b = np.roll(a, -1, 0)
        return a, b

    def contains(self, point) -> bool:
        """Whether the floor point (x, y) is inside or on the hull."""
        a, b = self._edges()
        p = np.asarray(point, np.float64)[:2]
        return bool((cross2(b - a, p - a) >= -1e-6).all())    # as lenient as convex_hull's straight edges

    def nearest(self, point) -> np.ndarray:
        """The point of the region nearest to the floor point (x, y) (itself when inside)."""
        p = np.asarray(point, np.float64)[:2]
        if self.contains(p):
            return p.copy()
        a, b = self._edges()
        ab = b - a
        t = np.clip(np.einsum("ij,ij->i", p - a, ab) / np.einsum("ij,ij->i", ab, ab), 0.0, 1.0)
        q = a + t[:, None] * ab
        return q[np.argmin(np.linalg.norm(q - p, axis=1))]

    def walk(self, start, end) -> np.ndarray:
        """Where a walk on the floor from ``start`` to ``end`` (x, y) ends inside the region: at
        ``end`` when it is inside, else at the region's point nearest to it (the walk slides along
        the edge it met). A start already outside (a start frame beyond every recording) may only
        walk towards the region: a walk that would take it farther out stays where it is. A start
        within ``EDGE_SLACK`` of the region counts as on its edge: a camera that slid along the edge
        is a rounding error outside it (a float32 view matrix), and must go on sliding."""
        start, end = np.asarray(start, np.float64)[:2], np.asarray(end, np.float64)[:2]
        if self.contains(end):
            return end.copy()
        gap = lambda p: float(np.linalg.norm(self.nearest(p) - p))     # noqa: E731
        if gap(start) > EDGE_SLACK:
            return end.copy() if gap(end) < gap(start) else start.copy()
        return self.nearest(end)

    def save(self, path: str | os.PathLike[str], frames: int) -> None:
        """``path`` (JSON, written atomically): the hull and how many camera positions it bounds."""
        vertices = ",\n  ".join(json.dumps(v) for v in self.hull.tolist())
        about = "where recorded players stood: a convex polygon on the floor (x, y metres, world frame)"
        text = (f'{{\n "about": "{about}",\n'
                f' "frames": {int(frames)},\n "hull": [\n  {vertices}\n ]\n}}\n')
        with atomic_path(path, keep_suffix=True) as tmp:
            Path(tmp).write_text(text)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "WalkableRegion":
        try:
            body = json.loads(Path(path).read_text())
            return cls(np.asarray(body["hull"], np.float64))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: not a walkable region ({e})") from e
