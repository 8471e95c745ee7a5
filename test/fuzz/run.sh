#!/usr/bin/env bash
# Runs a libFuzzer target for a bounded time: run.sh FUZZER SECONDS WORKDIR
# SEED_DIR... New inputs go to WORKDIR (the seed folders stay as they are);
# a finding (crash, sanitizer report, leak, timeout, out of memory) is
# written next to WORKDIR as crash-*, timeout-*, oom-* and fails the test.
# TASKGROUP_FUZZ_SECONDS, when set, replaces SECONDS.
set -euo pipefail
fuzzer=$1
seconds=${TASKGROUP_FUZZ_SECONDS:-$2}
work=$3
shift 3
mkdir -p "$work"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# -timeout: seconds per input; -rss_limit_mb and -malloc_limit_mb: memory;
# -max_len: large enough for the seed plans.
exec "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024 \
  -max_len=16384 -print_final_stats=1 -artifact_prefix="$(dirname "$work")/" "$work" "$@"
