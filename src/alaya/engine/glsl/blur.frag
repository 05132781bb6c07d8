#version 330
// Separable 9-tap Gaussian blur along `direction` (in texels).
uniform sampler2D source;
uniform vec2 direction;
out vec4 out_color;
void main() {
    vec2 size = vec2(textureSize(source, 0));
    vec2 uv = gl_FragCoord.xy / size;
    vec2 step_uv = direction / size;
    float w[5] = float[](0.227027, 0.1945946, 0.1216216, 0.054054, 0.016216);
    vec3 c = texture(source, uv).rgb * w[0];
    for (int i = 1; i < 5; i++) {
        c += texture(source, uv + step_uv * float(i)).rgb * w[i];
        c += texture(source, uv - step_uv * float(i)).rgb * w[i];
    }
    out_color = vec4(c, 1.0);
}
