#version 330
// Writes the G-buffer in formats that read back as contract arrays with little conversion:
// 0 RGBA16F camera-space normal, 1 R32F linear depth (0 = background), 2 RGBA8 albedo (sRGB)
// + roughness, 3 RG16F backward motion in pixels, 4 RGBA16UI material id, instance id, metallic.
uniform vec2 viewport;               // width, height in pixels
uniform sampler2D noise;             // tiling two-octave value noise in [0, 1]

in vec3 v_view_pos;
in vec3 v_view_normal;
in vec3 v_local_pos;
in vec4 v_prev_clip;
flat in vec3 v_ids;
flat in vec4 v_albedo_roughness;
flat in vec4 v_params;              // metallic, pattern, pattern scale, unused

layout(location = 0) out vec4 out_normal;
layout(location = 1) out float out_depth;
layout(location = 2) out vec4 out_albedo_roughness;
layout(location = 3) out vec2 out_motion;
layout(location = 4) out uvec4 out_ids;

vec3 pattern_albedo(vec3 base, float pattern, float scale, vec3 p) {
    vec3 q = p * scale;
    if (pattern > 2.5) {            // value noise; z folded in so that walls vary too
        float n = texture(noise, (q.xy + q.z * vec2(0.71, 0.37)) * 0.125).r;
        return base * (0.7 + 0.6 * n);
    } else if (pattern > 1.5) {     // planks / brick courses along z, offset along x
        float s = step(0.5, fract(q.z + 0.5 * floor(q.x)));
        float seam = smoothstep(0.0, 0.06, fract(q.z)) * smoothstep(0.0, 0.06, 1.0 - fract(q.z));
        return base * (0.8 + 0.2 * s) * (0.6 + 0.4 * seam);
    } else if (pattern > 0.5) {     // checker
        float c = mod(floor(q.x) + floor(q.y) + floor(q.z), 2.0);
        return base * (0.45 + 0.55 * c);
    }
    return base;
}

void main() {
    int mat_id = int(v_ids.y + 0.5);
    vec4 alb = v_albedo_roughness;
    vec4 par = v_params;
    vec3 albedo = clamp(pattern_albedo(alb.rgb, par.y, par.z, v_local_pos), 0.0, 1.0);

    // Rendered upside down (see raster.py), so gl_FragCoord.y is already the image row and the
    // previous clip position maps to pixels without a y flip.
    vec2 prev_px = (v_prev_clip.xy / v_prev_clip.w * 0.5 + 0.5) * viewport;

    out_normal = vec4(normalize(v_view_normal), 0.0);
    out_depth = -v_view_pos.z;
    out_albedo_roughness = vec4(albedo, alb.a);
    out_motion = prev_px - gl_FragCoord.xy;
    out_ids = uvec4(uint(mat_id), uint(v_ids.z + 0.5), uint(par.x * 255.0 + 0.5), 0u);
}
