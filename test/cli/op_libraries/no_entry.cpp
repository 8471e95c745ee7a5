// A shared object that is not a taskgroup op library: it has no entry point
// (test/cli/op_libraries.py: loading it is refused, naming the file).
extern "C" __attribute__((visibility("default"))) int not_an_op_library() { return 42; }
