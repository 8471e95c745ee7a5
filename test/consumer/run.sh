#!/usr/bin/env bash
# Builds and runs test/consumer with taskgroup as its subproject.
# Usage: run.sh TASKGROUP_SOURCE_ROOT BUILD_FOLDER
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
rm -rf "$work"
mkdir -p "$work/subprojects"
cp "$src/test/consumer/meson.build" "$src/test/consumer/consumer.cpp" "$work/"
ln -s "$src" "$work/subprojects/taskgroup"
cd "$work"
meson setup build --wrap-mode=nodownload >setup.log 2>&1 || { cat setup.log; exit 1; }

meson compile -C build >compile.log 2>&1 || { cat compile.log; exit 1; }
# Tests, examples, tools and benchmarks are built only at top level.
if [ -e build/subprojects/taskgroup/test ] || [ -e build/subprojects/taskgroup/examples ]; then
  echo "taskgroup built its tests or examples as a subproject"; exit 1
fi
./build/consumer
