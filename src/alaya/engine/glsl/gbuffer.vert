#version 330
// G-buffer pass: every geom of the scene in one draw call; model matrices come from a uniform
// block (entry 2g = geom g this frame, 2g + 1 = the previous frame, for motion vectors).
layout(std140) uniform ModelMatrices { mat4 models[256]; };
uniform mat4 view;
uniform mat4 prev_view;
uniform mat4 projection;
uniform vec4 material_albedo[32];    // sRGB albedo, roughness
uniform vec4 material_params[32];    // metallic, pattern, pattern scale, unused

in vec3 in_position;
in vec3 in_normal;
in vec3 in_ids;        // geom index, material id, instance id

out vec3 v_view_pos;
out vec3 v_view_normal;
out vec3 v_local_pos;
out vec4 v_prev_clip;
flat out vec3 v_ids;
flat out vec4 v_albedo_roughness;    // per-material constants, looked up once per vertex
flat out vec4 v_params;

void main() {
    int geom = int(in_ids.x + 0.5);
    mat4 model = models[2 * geom];
    mat4 prev_model = models[2 * geom + 1];
    vec4 view_pos = view * model * vec4(in_position, 1.0);
    v_view_pos = view_pos.xyz;
    v_view_normal = mat3(view) * mat3(model) * in_normal;
    v_local_pos = in_position;
    v_prev_clip = projection * prev_view * prev_model * vec4(in_position, 1.0);
    v_ids = in_ids;
    int mat_id = int(in_ids.y + 0.5);
    v_albedo_roughness = material_albedo[mat_id];
    v_params = material_params[mat_id];
    gl_Position = projection * view_pos;
}
