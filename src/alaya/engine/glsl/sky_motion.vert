#version 330
// Full-screen triangle for the background: writes the flow of points at infinity.
void main() {
    vec2 p = vec2(float((gl_VertexID << 1) & 2), float(gl_VertexID & 2)) * 2.0 - 1.0;
    gl_Position = vec4(p, 1.0, 1.0);
}
