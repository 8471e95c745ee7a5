#!/usr/bin/env bash
# Builds and runs test/consumer with taskgroup as its subproject, and checks
# that only what the consumer asks for is built: the default build (a
# consumer of `taskgroup`) leaves taskgroup_mpi alone; asking for the
# consumer of `taskgroup-mpi` builds it.
# Usage: run.sh TASKGROUP_SOURCE_ROOT BUILD_FOLDER
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
rm -rf "$work"
mkdir -p "$work/subprojects"
cp "$src/test/consumer/meson.build" "$src/test/consumer/consumer.cpp" "$src/test/consumer/consumer_mpi.cpp" "$work/"
ln -s "$src" "$work/subprojects/taskgroup"
cd "$work"
# --force-fallback-for: the subproject even where an installed taskgroup.pc
# would be found first. What is checked here is which parts a consumer
# gets built and that they link and run, not how fast they run: the
# library is compiled without optimization or debug information
# (buildtype=plain), sixteen source files a translation unit
# (unity=subprojects; the test command's own builds group eight).
meson setup build --wrap-mode=nodownload --force-fallback-for=taskgroup -Dunity=subprojects -Dunity_size=16 -Dbuildtype=plain >setup.log 2>&1 || { cat setup.log; exit 1; }

meson compile -C build >compile.log 2>&1 || { cat compile.log; exit 1; }
# Tests, examples, tools and benchmarks are built only at top level.
if [ -e build/subprojects/taskgroup/test ] || [ -e build/subprojects/taskgroup/examples ]; then
  echo "taskgroup built its tests or examples as a subproject"; exit 1
fi
lib=build/subprojects/taskgroup/lib
# (Meson makes a versioned library's link names at setup; -e follows them
# to the library file itself.)
[[ -e $lib/libtaskgroup.so ]] || { echo "no libtaskgroup in $lib"; ls -la "$lib"; exit 1; }
if [[ -e $lib/libtaskgroup_mpi.so ]] || compgen -G "$lib/libtaskgroup_mpi*.p/*.o" >/dev/null; then
  echo "taskgroup_mpi was built for a consumer that uses only taskgroup:"; ls -laR "$lib"; exit 1
fi
./build/consumer

if grep -q "^Dependency taskgroup-mpi found: YES" setup.log; then
  meson compile -C build consumer_mpi >compile-mpi.log 2>&1 || { cat compile-mpi.log; exit 1; }
  [[ -e $lib/libtaskgroup_mpi.so ]] || { echo "consumer_mpi built without taskgroup_mpi"; exit 1; }
  ./build/consumer_mpi
else
  echo "taskgroup has no MPI session here: consumer_mpi not built"
fi
