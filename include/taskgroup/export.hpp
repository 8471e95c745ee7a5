// TASKGROUP_API: what the shared libraries export.
//
// libtaskgroup and libtaskgroup_mpi are built with hidden visibility
// (-fvisibility=hidden): a symbol is visible to programs only when its
// declaration in a public header carries TASKGROUP_API. Everything else
// (the step machine, the drivers, the plan reader's parts) stays inside
// the library, where the compiler may inline and drop it freely and no
// program can come to depend on it.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define TASKGROUP_API __attribute__((visibility("default")))
#else
#define TASKGROUP_API
#endif
