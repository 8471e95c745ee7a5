// An op library whose registration throws: the loader reports the exception
// (it never crosses the C entry point), naming the file.
#include <taskgroup/op_library.hpp>

#include <stdexcept>

TASKGROUP_OP_LIBRARY(registry) {
  (void)registry;
  throw std::runtime_error("this library refuses to load");
}
