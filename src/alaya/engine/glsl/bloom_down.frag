#version 330
// Bright pass at half resolution: the part of the HDR image above the threshold.
uniform sampler2D hdr_tex;
uniform float threshold;
out vec4 out_color;
void main() {
    vec2 uv = gl_FragCoord.xy * 2.0 / vec2(textureSize(hdr_tex, 0));
    vec3 c = texture(hdr_tex, uv).rgb;
    float lum = max(max(c.r, c.g), c.b);
    out_color = vec4(c * max(lum - threshold, 0.0) / max(lum, 1e-4), 1.0);
}
