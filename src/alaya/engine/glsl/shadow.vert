#version 330
// Depth-only pass from the sun, for cast shadows in the reference renderer.
layout(std140) uniform ModelMatrices { mat4 models[256]; };
uniform mat4 light_view_projection;
in vec3 in_position;
in vec3 in_ids;

void main() {
    int geom = int(in_ids.x + 0.5);
    mat4 model = models[2 * geom];
    gl_Position = light_view_projection * model * vec4(in_position, 1.0);
}
