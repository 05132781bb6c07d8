"""Headless G-buffer rasterizer (moderngl, EGL, multiple render targets).

One draw call renders the whole scene: all geom meshes live in one vertex buffer in their
local frames, and the per-geom model matrices (this frame and the previous one, for motion
vectors) are uploaded each frame as a small float texture.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources

import moderngl
import numpy as np

from alaya.engine import meshes
from alaya.engine.materials import MATERIALS
from alaya.engine.scene import Scene

GLSL = resources.files("alaya.engine") / "glsl"


def load_glsl(name: str) -> str:
    return (GLSL / name).read_text()


def share_cores_with_a_model() -> None:
    """Have Mesa's llvmpipe rasterize on the calling thread (``LP_NUM_THREADS=1``) unless the
    user set it: by default it starts a thread per core, which at the play size gains nothing but
    competes with a model running beside the engine; at 512² its threads do help, so datagen
    keeps them (docs/engine.md, "Speed"). Call it before the process creates its first GL
    context: llvmpipe reads the setting once."""
    os.environ.setdefault("LP_NUM_THREADS", "1")


def create_context() -> moderngl.Context:
    """A standalone OpenGL 3.3+ context on the EGL backend (works without a display)."""
    try:
        return moderngl.create_context(standalone=True, backend="egl", require=330)
    except Exception as err:  # moderngl raises plain Exception on EGL failures
        raise RuntimeError(
            "could not create a headless OpenGL context through EGL: install Mesa's EGL "
            "(Debian: apt-get install libegl1 libegl-mesa0 libgl1-mesa-dri) — "
            f"underlying error: {err}"
        ) from err


def intrinsics(width: int, height: int, fov_y_degrees: float) -> np.ndarray:
    """Pinhole K in pixels, origin at the top-left pixel's corner, square pixels."""
    fy = 0.5 * height / np.tan(np.radians(fov_y_degrees) / 2)
    return np.array([[fy, 0, width / 2], [0, fy, height / 2], [0, 0, 1]], dtype=np.float32)


def projection_from_K(K: np.ndarray, width: int, height: int, near: float, far: float) -> np.ndarray:
    """OpenGL projection whose pixel mapping equals K (rows grow downward in the image)."""
    fx, fy, cx, cy = K[0, 0], K[1, 1], K[0, 2], K[1, 2]
    return np.array([
        [2 * fx / width, 0, 1 - 2 * cx / width, 0],
        [0, 2 * fy / height, 2 * cy / height - 1, 0],
        [0, 0, -(far + near) / (far - near), -2 * far * near / (far - near)],
        [0, 0, -1, 0],
    ], dtype=np.float64)


def gl_matrix(m: np.ndarray) -> bytes:
    """Bytes of a row-major numpy matrix in OpenGL's column-major layout."""
    return np.ascontiguousarray(np.asarray(m, dtype=np.float32).T).tobytes()


@dataclass
class SceneMesh:
    """All geoms in one vertex buffer, split into cullable chunks (one per geom, several tiles
    for the terrain)."""
    vertices: np.ndarray          # (V, 9) float32: position 3, normal 3, geom, material, instance
    chunk_indices: list[np.ndarray]
    chunk_geom: np.ndarray        # (C,) geom index of each chunk
    chunk_centre: np.ndarray      # (C, 3) bounding-sphere centre in the geom's local frame
    chunk_radius: np.ndarray      # (C,)
    chunk_static: np.ndarray      # (C,) drawn last (large static ground)


def _geom_mesh(scene: Scene, g) -> meshes.Mesh:
    if g.kind == "box":
        return meshes.box(g.size[:3])
    if g.kind == "sphere":
        return meshes.sphere(g.size[0])
    if g.kind == "capsule":
        return meshes.capsule(g.size[0], g.size[1])
    if g.kind == "cylinder":
        return meshes.cylinder(g.size[0], g.size[1])
    if g.kind == "hfield":
        return meshes.heightfield(scene.heightfield, scene.hfield_size)
    raise ValueError(f"geom {g.name}: unsupported kind {g.kind!r}")


def scene_mesh(scene: Scene, terrain_tiles: int = 4) -> SceneMesh:
    chunks, indices, geom, centre, radius, static, offset = [], [], [], [], [], [], 0
    for index, g in enumerate(scene.geoms):
        pos, nrm, tri = _geom_mesh(scene, g)
        chunks.append(np.concatenate([pos, nrm, np.tile([index, g.material, g.instance],
                                                        (len(pos), 1))], axis=1))
        if g.kind == "hfield":   # tiles of triangles, grouped by the centroid's grid cell
            cent = pos[tri].mean(axis=1)[:, :2]
            lo, hi = cent.min(0), cent.max(0) + 1e-6
            cell = np.floor((cent - lo) / (hi - lo) * terrain_tiles).astype(int)
            groups = [tri[(cell[:, 0] == a) & (cell[:, 1] == b)]
                      for a in range(terrain_tiles) for b in range(terrain_tiles)]
        else:
            groups = [tri]
        for group in groups:
            if len(group) == 0:
                continue
            pts = pos[np.unique(group)]
            c = (pts.min(0) + pts.max(0)) / 2 if g.kind == "hfield" else np.zeros(3)
            indices.append((group.reshape(-1) + offset).astype(np.uint32))
            geom.append(index)
            centre.append(c)
            radius.append(float(np.linalg.norm(pts - c, axis=1).max()))
            static.append(g.kind == "hfield")
        offset += len(pos)
    return SceneMesh(np.concatenate(chunks).astype(np.float32), indices, np.array(geom),
                     np.array(centre), np.array(radius), np.array(static))


def noise_texture(size: int = 64, seed: int = 0) -> np.ndarray:
    """(size, size) uint8 tiling value noise, two octaves (cell sizes size/8 and size/16)."""
    rng = np.random.default_rng(seed)

    def octave(cells: int) -> np.ndarray:
        lattice = rng.random((cells, cells))
        x = np.arange(size) * cells / size
        i0 = np.floor(x).astype(int) % cells
        i1 = (i0 + 1) % cells
        f = x - np.floor(x)
        f = f * f * (3 - 2 * f)
        rows = lattice[i0] * (1 - f)[:, None] + lattice[i1] * f[:, None]
        return rows[:, i0] * (1 - f) + rows[:, i1] * f

    v = 0.65 * octave(8) + 0.35 * octave(16)
    return np.clip(v * 255, 0, 255).astype(np.uint8)


class GBufferRasterizer:
    """Renders the G-buffer of a scene at ``width x height`` (multiples of 16)."""

    def __init__(self, scene: Scene, width: int = 128, height: int = 128, fov_y: float = 70.0,
                 near: float = 0.05, far: float = 200.0, ctx: moderngl.Context | None = None):
        for name, v in (("width", width), ("height", height)):
            if v <= 0 or v % 16:
                raise ValueError(f"{name} must be a positive multiple of 16, got {v}")
        self.scene, self.width, self.height = scene, width, height
        self.near, self.far = near, far
        self.ctx = ctx or create_context()
        self.K = intrinsics(width, height, fov_y)
        self.projection = projection_from_K(self.K, width, height, near, far)
        # Rendered upside down (GL's bottom row is image row 0), so readback rows are already
        # top-down; the flip reverses winding, hence front faces are clockwise.
        self.flip = np.diag([1.0, -1.0, 1.0, 1.0])
        ctx = self.ctx
        self.program = ctx.program(vertex_shader=load_glsl("gbuffer.vert"),
                                   fragment_shader=load_glsl("gbuffer.frag"))
        self.mesh = scene_mesh(scene)
        self.vbo = ctx.buffer(self.mesh.vertices.tobytes())
        all_indices = np.concatenate(self.mesh.chunk_indices)
        self.ibo = ctx.buffer(reserve=all_indices.nbytes)          # visible chunks, per frame
        self.ibo_all = ctx.buffer(all_indices.tobytes())            # everything (shadow maps)
        self.vao = ctx.vertex_array(self.program, [(self.vbo, "3f 3f 3f", "in_position",
                                                    "in_normal", "in_ids")], self.ibo, 4)
        self.n_geoms = len(scene.geoms)
        if self.n_geoms > 128:
            raise ValueError(f"scene has {self.n_geoms} geoms; the rasterizer supports 128")
        self.matrices = ctx.buffer(reserve=256 * 64)   # uniform block ModelMatrices
        albedo = np.zeros((32, 4), np.float32)
        params = np.zeros((32, 4), np.float32)
        for i, m in enumerate(MATERIALS, start=1):
            albedo[i] = (*m.albedo, m.roughness)
            params[i] = (m.metallic, m.pattern, m.pattern_scale, 0)
        self.program["material_albedo"].write(albedo.tobytes())
        self.program["material_params"].write(params.tobytes())
        self.program["viewport"].value = (width, height)
        self.program["projection"].write(gl_matrix(self.flip @ self.projection))
        self.program["ModelMatrices"].binding = 0
        self.program["noise"].value = 1
        self.noise = ctx.texture((64, 64), 1, noise_texture().tobytes())
        self.noise.repeat_x = self.noise.repeat_y = True
        # (components, dtype) of each render target; see glsl/gbuffer.frag
        self.formats = [(4, "f2"), (1, "f4"), (4, "f1"), (2, "f2"), (4, "u2")]
        self.targets = [ctx.texture((width, height), c, dtype=d) for c, d in self.formats]
        for t in self.targets:
            t.filter = (moderngl.NEAREST, moderngl.NEAREST)
        self.sky_program = ctx.program(vertex_shader=load_glsl("sky_motion.vert"),
                                       fragment_shader=load_glsl("sky_motion.frag"))
        self.sky_program["viewport"].value = (width, height)
        self.sky_program["intrinsics"].value = tuple(float(x) for x in
                                                     (self.K[0, 0], self.K[1, 1], self.K[0, 2], self.K[1, 2]))
        self.sky_vao = ctx.vertex_array(self.sky_program, [])
        self.depth_buffer = ctx.depth_renderbuffer((width, height))
        self.fbo = ctx.framebuffer(color_attachments=self.targets, depth_attachment=self.depth_buffer)
        self._prev: tuple[np.ndarray, np.ndarray] | None = None
        self.visible_chunks = 0
        self.frame_id = 0          # increments at every draw; renderers cache per-frame work
        fx, fy, cx, cy = (float(x) for x in (self.K[0, 0], self.K[1, 1], self.K[0, 2], self.K[1, 2]))
        # side planes of the frustum through the camera centre (u in [0, W], v in [0, H]),
        # inward unit normals in camera space (the camera looks down -z)
        planes = np.array([[fx, 0, -cx], [-fx, 0, -(width - cx)],
                           [0, -fy, -cy], [0, fy, -(height - cy)]], dtype=np.float64)
        self.frustum_planes = planes / np.linalg.norm(planes, axis=1, keepdims=True)

    def reset(self) -> None:
        """Forget the previous frame: the next frame gets zero motion."""
        self._prev = None

    def replace_previous_models(self, geoms: np.ndarray, matrices: np.ndarray) -> None:
        """Overwrite the previous-frame transforms of ``geoms`` (indices) with ``matrices``.

        For geoms teleported since the last frame (an interactive spawn): their motion vectors
        should show the motion after the teleport, not a jump from where they were parked.
        No effect before the first frame (which has zero motion anyway)."""
        if self._prev is not None and len(geoms):
            self._prev[0][np.asarray(geoms)] = matrices

    def draw(self, geom_matrices: np.ndarray, world_to_camera: np.ndarray) -> None:
        """Rasterize into the G-buffer textures (kept on the GPU for the reference renderer)."""
        first = self._prev is None
        prev_models, prev_view = (geom_matrices, world_to_camera) if first else self._prev
        # column-major mat4 pairs: (current, previous) per geom
        data = np.stack([geom_matrices.transpose(0, 2, 1), prev_models.transpose(0, 2, 1)], 1)
        self.matrices.write(np.ascontiguousarray(data, dtype=np.float32).tobytes())
        self.matrices.bind_to_uniform_block(0)
        self.noise.use(1)
        self.program["view"].write(gl_matrix(world_to_camera))
        self.program["prev_view"].write(gl_matrix(prev_view))
        rotation_to_prev = prev_view[:3, :3] @ np.asarray(world_to_camera)[:3, :3].T
        self.sky_program["rotation_to_prev"].write(gl_matrix(rotation_to_prev))
        self.sky_program["enabled"].value = 0.0 if first else 1.0
        count = self._write_visible_indices(geom_matrices, world_to_camera)
        self.fbo.use()
        self.fbo.clear(depth=1.0)
        self.ctx.front_face = "cw"
        self.ctx.enable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        self.ctx.depth_func = "<="
        if count:
            self.vao.render(moderngl.TRIANGLES, vertices=count)
        # background last, at the far plane: early depth test leaves only uncovered pixels
        self.ctx.disable(moderngl.CULL_FACE)
        self.sky_vao.render(moderngl.TRIANGLES, vertices=3)
        self.ctx.front_face = "ccw"
        self._first = first
        self.frame_id += 1
        self._prev = (np.asarray(geom_matrices, np.float32).copy(),
                      np.asarray(world_to_camera, np.float64).copy())

    def _write_visible_indices(self, geom_matrices: np.ndarray, view: np.ndarray) -> int:
        """Frustum-cull chunks by bounding sphere, order them front to back (less overdraw;
        the ground last), write their triangle indices and return the index count."""
        m = self.mesh
        models = geom_matrices[m.chunk_geom]
        world = (models[:, :3, :3] @ m.chunk_centre[:, :, None])[:, :, 0] + models[:, :3, 3]
        centres = world @ view[:3, :3].T + view[:3, 3]          # (C, 3) camera space
        depth = -centres[:, 2]
        r = m.chunk_radius
        inside = ((depth + r > self.near) & (depth - r < self.far)
                  & ((centres @ self.frustum_planes.T).min(axis=1) > -r))
        order = np.argsort(depth + m.chunk_static * 1e6)
        visible = [m.chunk_indices[i] for i in order[inside[order]].tolist()]
        self.visible_chunks = len(visible)
        if not visible:
            return 0
        indices = np.concatenate(visible)
        self.ibo.write(indices.tobytes())
        return len(indices)

    def read(self) -> dict[str, np.ndarray]:
        """Read the last drawn G-buffer back as contract arrays for one frame."""
        H, W = self.height, self.width
        raw = []
        for i, (c, d) in enumerate(self.formats):
            buf = self.fbo.read(components=c, attachment=i, dtype=d)
            raw.append(np.frombuffer(buf, np.dtype(d.replace("f1", "u1"))).reshape(H, W, c))
        normal, depth, albedo_rough, motion, ids = raw
        depth = depth[..., 0]
        if self._first:
            motion = np.zeros((H, W, 2), np.float16)
        # views into the read buffers (no copies); np.stack makes clips contiguous later
        return {
            "depth": depth,
            "mask": (depth > 0).view(np.uint8),
            "normal": normal[..., :3],
            "albedo": albedo_rough[..., :3],
            "roughness": albedo_rough[..., 3],
            "metallic": ids[..., 2].astype(np.uint8),
            "material": ids[..., 0],
            "instance": ids[..., 1],
            "motion": motion,
        }

    def render(self, geom_matrices: np.ndarray, world_to_camera: np.ndarray) -> dict[str, np.ndarray]:
        self.draw(geom_matrices, world_to_camera)
        return self.read()

    def release(self) -> None:
        for obj in (self.fbo, self.depth_buffer, *self.targets, self.matrices, self.noise, self.vao, self.vbo, self.ibo, self.ibo_all,
                    self.sky_vao, self.sky_program,
                    self.program):
            obj.release()
