#version 330
// HDR + bloom, exposure, filmic tone map, colour grade, vignette, sRGB output.
uniform sampler2D hdr_tex;
uniform sampler2D bloom_tex;
uniform vec2 viewport;
uniform float bloom_strength;
uniform float exposure;
uniform float saturation;
uniform float contrast;
uniform vec3 tint;
uniform float vignette;
out vec4 out_color;

vec3 aces(vec3 x) {   // Narkowicz 2015 fit of the ACES filmic curve
    return clamp((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), 0.0, 1.0);
}

void main() {
    vec2 uv = gl_FragCoord.xy / viewport;
    vec3 c = texelFetch(hdr_tex, ivec2(gl_FragCoord.xy), 0).rgb;
    c += texture(bloom_tex, uv).rgb * bloom_strength;
    c = aces(c * exposure) * tint;
    float luma = dot(c, vec3(0.2126, 0.7152, 0.0722));
    c = mix(vec3(luma), c, saturation);
    c = (c - 0.5) * contrast + 0.5;
    vec2 q = uv - 0.5;
    c *= 1.0 - vignette * dot(q, q) * 2.0;
    out_color = vec4(pow(clamp(c, 0.0, 1.0), vec3(1.0 / 2.2)), 1.0);
}
