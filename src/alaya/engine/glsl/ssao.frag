#version 330
// Screen-space ambient occlusion from linear depth and camera-space normals (non-local: each
// pixel looks at the depth of its neighbourhood). Rows of every texture run top-down.
uniform sampler2D depth_tex;
uniform sampler2D normal_tex;
uniform vec4 intrinsics;          // fx, fy, cx, cy
uniform vec2 viewport;
uniform float radius;             // metres
uniform vec3 kernel[12];          // hemisphere samples, z >= 0, |k| <= 1
out float out_ao;

vec3 camera_point(vec2 px, float d) {
    return vec3((px.x - intrinsics.z) / intrinsics.x * d, -(px.y - intrinsics.w) / intrinsics.y * d, -d);
}

void main() {
    ivec2 ip = ivec2(gl_FragCoord.xy);
    float d = texelFetch(depth_tex, ip, 0).r;
    if (d <= 0.0) { out_ao = 1.0; return; }
    vec3 n = texelFetch(normal_tex, ip, 0).xyz;
    vec3 p = camera_point(gl_FragCoord.xy, d);
    float angle = float((ip.x & 3) * 4 + (ip.y & 3)) * (6.2831853 / 16.0);
    vec3 helper = abs(n.z) < 0.9 ? vec3(0.0, 0.0, 1.0) : vec3(1.0, 0.0, 0.0);
    vec3 t0 = normalize(cross(helper, n));
    vec3 b0 = cross(n, t0);
    vec3 t = cos(angle) * t0 + sin(angle) * b0;
    vec3 b = cross(n, t);
    float occlusion = 0.0;
    for (int i = 0; i < 12; i++) {
        vec3 k = kernel[i];
        vec3 s = p + (t * k.x + b * k.y + n * k.z) * radius;
        float sd = -s.z;
        if (sd <= 0.01) continue;
        vec2 spx = vec2(intrinsics.x * s.x / sd + intrinsics.z, intrinsics.w - intrinsics.y * s.y / sd);
        if (any(lessThan(spx, vec2(0.0))) || any(greaterThanEqual(spx, viewport))) continue;
        float scene = texelFetch(depth_tex, ivec2(spx), 0).r;
        if (scene <= 0.0) continue;
        float in_range = smoothstep(0.0, 1.0, radius / max(abs(d - scene), 1e-4));
        occlusion += (scene < sd - 0.03 ? 1.0 : 0.0) * in_range;
    }
    out_ao = 1.0 - occlusion / 12.0;
}
