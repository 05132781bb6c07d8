"""Reference renderer: deferred shading of the rasterizer's G-buffer into named styles.

Beyond a per-pixel function of the G-buffer it draws non-local effects: cast shadows (a shadow
map rendered from the sun over the scene geometry), screen-space ambient occlusion, a sky,
distance and height fog, bloom around emissive materials, and cel-shading outlines.
The G-buffer stays on the GPU: call ``GBufferRasterizer.draw`` first, then ``render`` for each
style of that frame.
"""

from __future__ import annotations

import moderngl
import numpy as np

from alaya.engine.camera import look_at
from alaya.engine.materials import MATERIALS
from alaya.engine.raster import GBufferRasterizer, gl_matrix, load_glsl
from alaya.engine.styles import Style, get_style


def _direction(elevation_deg: float, azimuth_deg: float) -> np.ndarray:
    e, a = np.radians(elevation_deg), np.radians(azimuth_deg)
    return np.array([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)])


def _ao_kernel(n: int = 12, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    k = rng.normal(size=(n, 3))
    k[:, 2] = np.abs(k[:, 2]) + 0.15
    k /= np.linalg.norm(k, axis=1, keepdims=True)
    scale = 0.2 + 0.8 * (np.arange(n) / n) ** 2    # more samples close to the point
    return (k * scale[:, None]).astype(np.float32)


def light_matrix(sun: np.ndarray, extent: float) -> np.ndarray:
    """Orthographic view-projection of the sun covering a square of half-size ``extent``."""
    up = (0.0, 1.0, 0.0) if abs(sun[2]) > 0.99 else (0.0, 0.0, 1.0)
    view = look_at(sun * 60.0, (0.0, 0.0, 0.0), up)
    r = extent * 1.45
    near, far = 1.0, 130.0
    proj = np.array([[1 / r, 0, 0, 0], [0, 1 / r, 0, 0],
                     [0, 0, -2 / (far - near), -(far + near) / (far - near)], [0, 0, 0, 1]])
    return proj @ view


class ReferenceRenderer:
    def __init__(self, raster: GBufferRasterizer, extent: float | None = None):
        self.raster = raster
        ctx = self.ctx = raster.ctx
        W, H = raster.width, raster.height
        self.extent = extent if extent is not None else raster.scene.config.arena + 2.0
        vert = load_glsl("fullscreen.vert")
        prog = {n: ctx.program(vertex_shader=vert, fragment_shader=load_glsl(f"{n}.frag"))
                for n in ("ssao", "lighting", "bloom_down", "blur", "composite")}
        self.programs = prog
        self.vaos = {n: ctx.vertex_array(p, []) for n, p in prog.items()}
        self.shadow_program = ctx.program(vertex_shader=load_glsl("shadow.vert"),
                                          fragment_shader=load_glsl("shadow.frag"))
        self.shadow_program["ModelMatrices"].binding = 0
        self.shadow_vao = ctx.vertex_array(self.shadow_program,
                                           [(raster.vbo, "3f 12x 3f", "in_position", "in_ids")],
                                           raster.ibo_all, 4)
        size = int(np.clip(4 * max(W, H), 512, 2048))
        self.shadow_map = ctx.depth_texture((size, size))
        self.shadow_map.compare_func = "<="
        self.shadow_map.filter = (moderngl.LINEAR, moderngl.LINEAR)
        self.shadow_fbo = ctx.framebuffer(depth_attachment=self.shadow_map)

        def target(w, h, c, dtype, linear=True):
            t = ctx.texture((w, h), c, dtype=dtype)
            t.filter = (moderngl.LINEAR, moderngl.LINEAR) if linear else (moderngl.NEAREST,) * 2
            t.repeat_x = t.repeat_y = False
            return t, ctx.framebuffer(color_attachments=[t])

        self.ao, self.ao_fbo = target(W, H, 1, "f1")
        self.hdr, self.hdr_fbo = target(W, H, 4, "f2")
        hw, hh = max(W // 2, 1), max(H // 2, 1)
        self.bloom_a, self.bloom_a_fbo = target(hw, hh, 4, "f2")
        self.bloom_b, self.bloom_b_fbo = target(hw, hh, 4, "f2")
        self.out, self.out_fbo = target(W, H, 4, "f1", linear=False)

        K = raster.K
        intr = tuple(float(x) for x in (K[0, 0], K[1, 1], K[0, 2], K[1, 2]))
        for name in ("ssao", "lighting"):
            prog[name]["intrinsics"].value = intr
            prog[name]["viewport"].value = (W, H)
        prog["composite"]["viewport"].value = (W, H)
        prog["ssao"]["kernel"].write(_ao_kernel().tobytes())
        prog["ssao"]["radius"].value = 0.6
        emission = np.zeros((32, 3), np.float32)
        for i, m in enumerate(MATERIALS, start=1):
            emission[i] = m.emission
        prog["lighting"]["material_emission"].write(emission.tobytes())
        prog["lighting"]["shadow_texel"].value = 1.0 / size
        self._set_samplers()
        self._ao_frame = -1
        self._shadow_key: tuple | None = None

    def _set_samplers(self) -> None:
        p = self.programs
        p["ssao"]["depth_tex"].value, p["ssao"]["normal_tex"].value = 1, 0
        units = {"normal_tex": 0, "depth_tex": 1, "albedo_tex": 2, "ids_tex": 4,
                 "ao_tex": 5, "shadow_tex": 6, "noise": 7}
        for name, unit in units.items():
            p["lighting"][name].value = unit
        p["bloom_down"]["hdr_tex"].value = 0
        p["blur"]["source"].value = 0
        p["composite"]["hdr_tex"].value, p["composite"]["bloom_tex"].value = 0, 1

    def _bind_gbuffer(self) -> None:
        for unit, tex in enumerate(self.raster.targets):   # normal, depth, albedo, motion, ids
            tex.use(unit)

    def _shadow_pass(self, sun: np.ndarray) -> np.ndarray:
        key = (self.raster.frame_id, tuple(np.round(sun, 6)))
        lvp = light_matrix(sun, self.extent)
        if key != self._shadow_key:
            self.raster.matrices.bind_to_uniform_block(0)
            self.shadow_program["light_view_projection"].write(gl_matrix(lvp))
            self.shadow_fbo.use()
            self.shadow_fbo.clear(depth=1.0)
            self.ctx.enable(moderngl.DEPTH_TEST)
            self.ctx.disable(moderngl.CULL_FACE)
            self.shadow_vao.render(moderngl.TRIANGLES)
            self._shadow_key = key
        return lvp

    def _ao_pass(self) -> None:
        if self._ao_frame == self.raster.frame_id:
            return
        self.ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        self._bind_gbuffer()
        self.ao_fbo.use()
        self.vaos["ssao"].render(moderngl.TRIANGLES, vertices=3)
        self._ao_frame = self.raster.frame_id

    def render(self, style: Style, world_to_camera: np.ndarray) -> np.ndarray:
        """(H, W, 3) uint8 sRGB image of the last rasterized frame in ``style``."""
        sun = _direction(style.sun_elevation, style.sun_azimuth)
        lvp = self._shadow_pass(sun)
        self._ao_pass()
        ctx = self.ctx
        ctx.disable(moderngl.DEPTH_TEST | moderngl.CULL_FACE)
        self._bind_gbuffer()
        self.ao.use(5)
        self.shadow_map.use(6)
        self.raster.noise.use(7)
        p = self.programs["lighting"]
        p["camera_to_world"].write(gl_matrix(np.linalg.inv(world_to_camera)))
        p["light_view_projection"].write(gl_matrix(lvp))
        p["sun_direction"].value = tuple(sun)
        p["sun_color"].value = style.sun_color
        p["sun_radiance"].value = tuple(np.array(style.sun_color) * style.sun_intensity)
        fill = _direction(*style.fill_direction)
        p["fill_direction"].value = tuple(fill)
        p["fill_radiance"].value = style.fill_color
        for name in ("sky_zenith", "sky_horizon", "ground_ambient", "fog_color"):
            p[name].value = getattr(style, name)
        for name in ("ambient_intensity", "fog_density", "fog_height_falloff", "emissive_gain",
                     "shadow_softness", "shadow_strength", "roughness_scale", "snow", "stars", "sun_disk",
                     "outline"):
            p[name].value = float(getattr(style, name))
        p["toon_levels"].value = float(style.toon_levels)
        self.hdr_fbo.use()
        self.vaos["lighting"].render(moderngl.TRIANGLES, vertices=3)

        self.programs["bloom_down"]["threshold"].value = style.bloom_threshold
        self.hdr.use(0)
        self.bloom_a_fbo.use()
        self.vaos["bloom_down"].render(moderngl.TRIANGLES, vertices=3)
        blur = self.programs["blur"]
        for src, dst, direction in ((self.bloom_a, self.bloom_b_fbo, (1.0, 0.0)),
                                    (self.bloom_b, self.bloom_a_fbo, (0.0, 1.0)),
                                    (self.bloom_a, self.bloom_b_fbo, (2.0, 0.0)),
                                    (self.bloom_b, self.bloom_a_fbo, (0.0, 2.0))):
            blur["direction"].value = direction
            src.use(0)
            dst.use()
            self.vaos["blur"].render(moderngl.TRIANGLES, vertices=3)

        c = self.programs["composite"]
        for name in ("bloom_strength", "exposure", "saturation", "contrast", "vignette"):
            c[name].value = float(getattr(style, name))
        c["tint"].value = style.tint
        self.hdr.use(0)
        self.bloom_a.use(1)
        self.out_fbo.use()
        self.vaos["composite"].render(moderngl.TRIANGLES, vertices=3)
        W, H = self.raster.width, self.raster.height
        return np.frombuffer(self.out_fbo.read(components=3), np.uint8).reshape(H, W, 3).copy()

    def release(self) -> None:
        """Free this renderer's GPU objects (the rasterizer's stay); for long-lived shared
        contexts that outlive many streams."""
        for obj in (*self.vaos.values(), *self.programs.values(), self.shadow_vao, self.shadow_program,
                    self.shadow_fbo, self.shadow_map, self.ao_fbo, self.ao, self.hdr_fbo, self.hdr,
                    self.bloom_a_fbo, self.bloom_a, self.bloom_b_fbo, self.bloom_b, self.out_fbo, self.out):
            obj.release()


class StyledStream:
    """A stream's frames in the reference styles: the renderer over its rasterizer
    (``self.raster``), made on first use, draws its last frame (``self.world_to_camera``)."""

    raster: GBufferRasterizer
    world_to_camera: np.ndarray | None
    _reference: ReferenceRenderer | None = None

    @property
    def reference(self) -> ReferenceRenderer:
        if self._reference is None:
            self._reference = ReferenceRenderer(self.raster)
        return self._reference

    def render_style(self, style: str) -> np.ndarray:
        """(H, W, 3) uint8: the last stepped frame in a reference style."""
        if self.world_to_camera is None:
            raise RuntimeError("render_style needs a frame: call step() first")
        return self.reference.render(get_style(style), self.world_to_camera)
