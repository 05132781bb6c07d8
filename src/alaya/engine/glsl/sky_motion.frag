#version 330
// Background of the G-buffer: zeros everywhere except motion, which is the backward flow of a
// point at infinity under the camera's rotation (so whole frames can be warped).
uniform mat3 rotation_to_prev;     // R_prev * R_cur^T
uniform vec4 intrinsics;           // fx, fy, cx, cy (pixels, origin top-left corner)
uniform vec2 viewport;
uniform float enabled;             // 0 on the first frame of a stream: motion is exactly zero

layout(location = 0) out vec4 out_normal;
layout(location = 1) out float out_depth;
layout(location = 2) out vec4 out_albedo_roughness;
layout(location = 3) out vec2 out_motion;
layout(location = 4) out uvec4 out_ids;

void main() {
    vec2 cur_px = gl_FragCoord.xy;    // rendered upside down: y is already the image row
    vec3 ray = vec3((cur_px.x - intrinsics.z) / intrinsics.x, -(cur_px.y - intrinsics.w) / intrinsics.y, -1.0);
    vec3 d = rotation_to_prev * ray;
    float z = min(d.z, -1e-3);
    vec2 prev_px = vec2(intrinsics.x * d.x / -z + intrinsics.z, intrinsics.w - intrinsics.y * d.y / -z);
    out_normal = vec4(0.0);
    out_depth = 0.0;
    out_albedo_roughness = vec4(0.0);
    out_motion = clamp(prev_px - cur_px, vec2(-4.0 * viewport.x), vec2(4.0 * viewport.x)) * enabled;
    out_ids = uvec4(0u);
}
