#!/usr/bin/env bash
# Builds and runs consumers of an installed copy of taskgroup: installs the
# build folder (no rebuild) into a folder of this test's own, then builds
# test/consumer's programs against that copy only, and checks that they run
# with its libraries (versioned sonames, resolved inside the copy).
#   pkgconfig: g++ $(pkg-config --define-prefix --cflags --libs taskgroup),
#              and mpicxx with taskgroup-mpi when there is MPI;
#   cmake:     find_package(taskgroup CONFIG REQUIRED), taskgroup::taskgroup
#              and, with MPI, taskgroup::mpi.
# Usage: installed.sh pkgconfig|cmake SOURCE_ROOT BUILD_ROOT WORK PREFIX LIBDIR SOVERSION mpi|nompi
set -euo pipefail
mode=$1 src=$(cd "$2" && pwd) build=$3 work=$4 prefix=$5 libdir=$6 soversion=$7 mpi=$8

rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
root=$work/root
meson install -C "$build" --destdir "$root" --no-rebuild >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
case $libdir in
  /*) lib=$root$libdir ;;
  *) lib=$root$prefix/$libdir ;;
esac
pfx=$root$prefix

fail() { echo "FAIL: $*" >&2; exit 1; }

# The installed libraries carry the versioned soname, and the link names
# point at them.
check_installed_lib() {  # name
  local soname=lib$1.so.$soversion
  [[ -L $lib/lib$1.so && -e $lib/$soname ]] || fail "$lib has no lib$1.so -> $soname"
  readelf -d "$lib/$soname" | grep -q "(SONAME).*\[$soname\]" || fail "$lib/$soname: soname is not $soname"
}

# The program links the versioned soname and, run as given, loads it from
# the installed copy.
check_uses_copy() {  # program library-name [env...]
  local exe=$1 soname=lib$2.so.$soversion; shift 2
  readelf -d "$exe" | grep -q "(NEEDED).*\[$soname\]" || fail "$exe does not link $soname"
  local line
  line=$(env "$@" LD_TRACE_LOADED_OBJECTS=1 "$exe" | grep "$soname =>") || fail "$exe: $soname not loaded"
  local loaded
  loaded=$(realpath "$(awk '{print $3}' <<<"$line")")
  [[ $loaded == "$(realpath "$lib")"/* ]] || fail "$exe loads $soname from $loaded, not from the installed copy $lib"
}

run_mpi() {  # program [library folder]
  local exe=$1 dir=${2:-}
  local env=() x=()
  if [[ -n $dir ]]; then env=(LD_LIBRARY_PATH="$dir"); x=(-x LD_LIBRARY_PATH="$dir"); fi
  if command -v mpirun >/dev/null; then
    mpirun --allow-run-as-root --oversubscribe --timeout 60 -np 2 "${x[@]}" "$exe"
  else
    env "${env[@]}" "$exe"
  fi
}

check_installed_lib taskgroup
if [[ $mpi == mpi ]]; then check_installed_lib taskgroup_mpi; fi

case $mode in
pkgconfig)
  export PKG_CONFIG_PATH=$lib/pkgconfig
  # Both ways of asking resolve into the copy (the .pc paths are relative
  # to the file, and --define-prefix must not move them).
  for p in "" --define-prefix; do
    for v in includedir libdir; do
      got=$(pkg-config $p --variable=$v taskgroup)
      case $v in includedir) want=$pfx/include ;; libdir) want=$lib ;; esac
      [[ $(realpath -m "$got") == "$(realpath -m "$want")" ]] || fail "pkg-config $p --variable=$v taskgroup: $got, not $want"
    done
  done
  flags=$(pkg-config --define-prefix --cflags --libs taskgroup)
  if grep -qE -- '(^| )-D' <<<"$flags"; then fail "taskgroup.pc imposes a definition: $flags"; fi
  # shellcheck disable=SC2086
  g++ -std=c++20 -o "$work/consumer" "$src/test/consumer/consumer.cpp" $flags
  check_uses_copy "$work/consumer" taskgroup LD_LIBRARY_PATH="$lib"
  LD_LIBRARY_PATH=$lib "$work/consumer"
  if [[ $mpi == mpi ]]; then
    # Without --define-prefix: it would also move the system MPI's module
    # (ompi-cxx.pc) to a wrong grandparent folder under the multiarch libdir.
    mflags=$(pkg-config --cflags --libs taskgroup-mpi)
    if grep -qE -- '(^| )-D' <<<"$mflags"; then fail "taskgroup-mpi.pc imposes a definition: $mflags"; fi
    # shellcheck disable=SC2086
    mpicxx -std=c++20 -o "$work/consumer_mpi" "$src/test/consumer/consumer_mpi.cpp" $mflags
    check_uses_copy "$work/consumer_mpi" taskgroup_mpi LD_LIBRARY_PATH="$lib"
    run_mpi "$work/consumer_mpi" "$lib"
  fi
  ;;
cmake)
  with_mpi=OFF
  if [[ $mpi == mpi ]]; then with_mpi=ON; fi
  gen=()
  if command -v ninja >/dev/null; then gen=(-G Ninja); fi
  cmake -S "$src/test/consumer" -B "$work/cmake-build" "${gen[@]}" -DCMAKE_PREFIX_PATH="$pfx" \
    -DCONSUMER_MPI=$with_mpi >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; exit 1; }
  found=$(sed -n 's/^taskgroup_DIR:PATH=//p' "$work/cmake-build/CMakeCache.txt")
  [[ $(realpath "$found") == "$(realpath "$lib")"/* ]] || fail "find_package found taskgroup in $found, not in the installed copy"
  cmake --build "$work/cmake-build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
  # No LD_LIBRARY_PATH: CMake's build rpath points into the copy.
  check_uses_copy "$work/cmake-build/consumer" taskgroup
  "$work/cmake-build/consumer"
  if [[ $mpi == mpi ]]; then
    check_uses_copy "$work/cmake-build/consumer_mpi" taskgroup_mpi
    run_mpi "$work/cmake-build/consumer_mpi"
  fi
  ;;
*) fail "unknown mode $mode" ;;
esac
