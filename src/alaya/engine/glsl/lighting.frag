#version 330
// Deferred shading of the G-buffer for one style, in linear HDR: sun with a shadow map, fill
// light, sky ambient with SSAO, GGX specular, emission, snow cover, cel shading and outlines,
// height fog, and a procedural sky (with stars) for the background.
uniform sampler2D depth_tex;
uniform sampler2D normal_tex;
uniform sampler2D albedo_tex;         // sRGB albedo + roughness
uniform usampler2D ids_tex;           // material, instance, metallic * 255
uniform sampler2D ao_tex;
uniform sampler2DShadow shadow_tex;
uniform sampler2D noise;
uniform vec4 intrinsics;
uniform vec2 viewport;
uniform mat4 camera_to_world;
uniform mat4 light_view_projection;
uniform float shadow_texel;
uniform vec3 material_emission[32];

uniform vec3 sun_direction;           // unit, towards the sun
uniform vec3 sun_radiance;            // colour * intensity
uniform vec3 sun_color;
uniform vec3 fill_direction;
uniform vec3 fill_radiance;
uniform vec3 sky_zenith;
uniform vec3 sky_horizon;
uniform vec3 ground_ambient;
uniform float ambient_intensity;
uniform vec3 fog_color;
uniform float fog_density;
uniform float fog_height_falloff;
uniform float emissive_gain;
uniform float shadow_softness;
uniform float shadow_strength;
uniform float roughness_scale;
uniform float snow;
uniform float stars;
uniform float sun_disk;
uniform float toon_levels;
uniform float outline;

out vec4 out_color;

float hash13(vec3 p) {
    p = fract(p * 0.1031);
    p += dot(p, p.zyx + 31.32);
    return fract((p.x + p.y) * p.z);
}

vec3 sky(vec3 dir) {
    float h = dir.z;
    vec3 c = mix(sky_horizon, sky_zenith, pow(clamp(h, 0.0, 1.0), 0.5));
    if (h < 0.0) c = mix(sky_horizon, ground_ambient, clamp(-h * 4.0, 0.0, 1.0));
    float s = max(dot(dir, sun_direction), 0.0);
    c += sun_disk * sun_color * (smoothstep(0.9990, 0.9996, s) * 8.0 + pow(s, 12.0) * 0.35);
    if (stars > 0.0 && h > 0.0) {
        vec3 q = floor(dir * 180.0);
        c += vec3(step(0.996, hash13(q)) * stars * 1.5 * smoothstep(0.0, 0.2, h));
    }
    return c;
}

float shadow_at(vec3 P, vec3 N) {
    vec4 lc = light_view_projection * vec4(P + N * 0.04, 1.0);
    vec3 sc = lc.xyz / lc.w * 0.5 + 0.5;
    if (any(lessThan(sc, vec3(0.0))) || any(greaterThan(sc, vec3(1.0)))) return 1.0;
    float r = shadow_texel * shadow_softness;
    float lit = 0.0;
    lit += texture(shadow_tex, vec3(sc.xy + vec2(-r, -r), sc.z - 0.0015));
    lit += texture(shadow_tex, vec3(sc.xy + vec2( r, -r), sc.z - 0.0015));
    lit += texture(shadow_tex, vec3(sc.xy + vec2(-r,  r), sc.z - 0.0015));
    lit += texture(shadow_tex, vec3(sc.xy + vec2( r,  r), sc.z - 0.0015));
    return mix(1.0, lit * 0.25, shadow_strength);
}

float edge_at(ivec2 ip, float d, vec3 n) {
    float e = 0.0;
    ivec2 offsets[4] = ivec2[](ivec2(1, 0), ivec2(-1, 0), ivec2(0, 1), ivec2(0, -1));
    for (int i = 0; i < 4; i++) {
        ivec2 q = clamp(ip + offsets[i], ivec2(0), ivec2(viewport) - 1);
        float dq = texelFetch(depth_tex, q, 0).r;
        vec3 nq = texelFetch(normal_tex, q, 0).xyz;
        bool depth_edge = (dq <= 0.0) != (d <= 0.0) || abs(dq - d) > 0.08 * max(d, 0.1);
        bool normal_edge = d > 0.0 && dq > 0.0 && dot(nq, n) < 0.6;
        e = max(e, (depth_edge || normal_edge) ? 1.0 : 0.0);
    }
    return e;
}

void main() {
    ivec2 ip = ivec2(gl_FragCoord.xy);
    vec2 px = gl_FragCoord.xy;
    float d = texelFetch(depth_tex, ip, 0).r;
    vec3 ray_cam = normalize(vec3((px.x - intrinsics.z) / intrinsics.x, -(px.y - intrinsics.w) / intrinsics.y, -1.0));
    vec3 view_dir = normalize(mat3(camera_to_world) * ray_cam);       // from the eye outward
    vec3 eye = camera_to_world[3].xyz;
    vec3 color;
    if (d <= 0.0) {
        color = sky(view_dir);
        color = mix(color, fog_color, clamp(fog_density * 12.0 * (1.0 - clamp(view_dir.z, 0.0, 1.0)), 0.0, 1.0));
    } else {
        vec3 n_cam = texelFetch(normal_tex, ip, 0).xyz;
        vec4 ar = texelFetch(albedo_tex, ip, 0);
        uvec4 ids = texelFetch(ids_tex, ip, 0);
        vec3 albedo = pow(ar.rgb, vec3(2.2));
        float roughness = ar.a;
        float metallic = float(ids.z) / 255.0;
        vec3 N = normalize(mat3(camera_to_world) * n_cam);
        vec3 P = eye + view_dir * (d / max(-ray_cam.z, 1e-4));
        vec3 V = -view_dir;
        if (snow > 0.0) {
            float n = texture(noise, P.xy * 0.35).r;
            float cover = snow * smoothstep(0.45, 0.8, N.z + 0.35 * (n - 0.5));
            albedo = mix(albedo, vec3(0.86, 0.9, 0.95), cover);
            roughness = mix(roughness, 0.85, cover);
            metallic *= 1.0 - cover;
        }
        roughness = clamp(roughness * roughness_scale, 0.04, 1.0);
        float ao = texture(ao_tex, px / viewport).r;
        float shadow = shadow_at(P, N);
        vec3 L = sun_direction;
        float ndl = max(dot(N, L), 0.0);
        float lit = ndl * shadow;
        if (toon_levels > 0.0) lit = floor(lit * toon_levels + 0.5) / toon_levels;
        vec3 H = normalize(L + V);
        float ndh = max(dot(N, H), 0.0), ndv = max(dot(N, V), 1e-3);
        float a2 = pow(roughness, 4.0);
        float D = a2 / (3.14159 * pow(ndh * ndh * (a2 - 1.0) + 1.0, 2.0));
        vec3 F0 = mix(vec3(0.04), albedo, metallic);
        vec3 F = F0 + (1.0 - F0) * pow(1.0 - max(dot(H, V), 0.0), 5.0);
        float k = (roughness + 1.0) * (roughness + 1.0) / 8.0;
        float G = ndl / (ndl * (1.0 - k) + k) * ndv / (ndv * (1.0 - k) + k);
        vec3 spec = D * F * G / max(4.0 * ndl * ndv, 1e-3);
        if (toon_levels > 0.0) spec = vec3(step(0.5, length(spec)) * 0.6);
        vec3 diffuse = albedo * (1.0 - metallic);
        color = (diffuse + spec * 0.25) * sun_radiance * lit;
        color += diffuse * fill_radiance * max(dot(N, fill_direction), 0.0);
        vec3 sky_ambient = mix(ground_ambient, mix(sky_horizon, sky_zenith, 0.5), N.z * 0.5 + 0.5);
        color += diffuse * sky_ambient * ambient_intensity * ao;
        vec3 R = reflect(view_dir, N);
        color += F * sky(R) * ambient_intensity * ao * (1.0 - roughness) * (0.3 + 0.7 * metallic);
        color += material_emission[ids.x] * emissive_gain;
        float dist = length(P - eye);
        float height = fog_height_falloff > 0.0 ? exp(-fog_height_falloff * max(P.z, 0.0)) : 1.0;
        float fog = 1.0 - exp(-fog_density * dist * height);
        vec3 fog_lit = fog_color + sun_color * pow(max(dot(view_dir, L), 0.0), 8.0) * 0.25;
        color = mix(color, fog_lit, fog);
    }
    if (outline > 0.0) color *= 1.0 - outline * edge_at(ip, d, texelFetch(normal_tex, ip, 0).xyz);
    out_color = vec4(color, 1.0);
}
