// The header check passes by compiling: each generated translation unit
// includes one header first and alone.
int main() { return 0; }
