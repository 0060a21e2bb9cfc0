# The build logic scripts/check-libtorch2 and scripts/gpu-check share: configure, build and test
# gcrun as timed stages, each logged to a file, and one summary table at the end. Sourced, not run.
#
# The caller sets, before calling the stages:
#   run_in   command prefix the build runs under (an array: empty, or a chroot wrapper)
#   src      the source tree as run_in sees it;  build  the build folder as run_in sees it
#   logs     a folder (on this machine) for the stages' logs
#   title    the summary table's first line
# Every stage adds a row; the first failure prints its log's tail and exits 1, and the table is
# printed on every exit (the caller's EXIT trap calls printSummary).

rows=()
# One table row: stage, seconds, outcome.
row() { rows+=("$(printf '%-12s %8s  %s' "$1" "$2" "$3")"); }
printSummary() {
  echo
  echo "$title"
  printf '%-12s %8s  %s\n' stage seconds outcome
  local line
  for line in "${rows[@]}"; do echo "$line"; done
}

# Runs a stage, timed; on failure records it and stops.
stage() {
  local name="$1"; shift
  local start=$SECONDS log="$logs/gcrun-$name.log"
  if "$@" >"$log" 2>&1; then
    row "$name" $((SECONDS - start)) ok
  else
    row "$name" $((SECONDS - start)) "FAILED (see $log)"
    tail -n 30 "$log" >&2
    exit 1
  fi
}

# configureGcrun [cmake arguments...]: sets `configured` to CMake's "gcrun: Torch ..." line.
configureGcrun() {
  stage configure "${run_in[@]}" cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
  configured="$(grep -o 'gcrun: Torch .*' "$logs/gcrun-configure.log" || true)"
  rows[${#rows[@]} - 1]+=": ${configured:-no gcrun: line}"
}

# requireNccl: the CUDA builds must compile the NCCL code.
requireNccl() {
  if ! grep -q 'NCCL support: ON' <<<"$configured"; then
    row nccl 0 "FAILED: a CUDA build must compile the NCCL code (NCCL support: ON)"
    exit 1
  fi
}

buildGcrun() { stage build "${run_in[@]}" cmake --build "$build" -j "$(nproc)"; }

# testGcrun [ctest arguments...]: the whole suite; the row counts passed, failed and skipped.
testGcrun() {
  local start=$SECONDS log="$logs/gcrun-tests.log" ok=1
  "${run_in[@]}" ctest --test-dir "$build" -j "$(nproc)" --output-on-failure --timeout 900 "$@" >"$log" 2>&1 || ok=0
  local counts skipped
  counts="$(grep -Eo '[0-9]+% tests passed, [0-9]+ tests failed out of [0-9]+' "$log" || echo "no ctest summary")"
  skipped="$(grep -c '(Skipped)$' "$log" || true)"
  if [ "$ok" = 1 ]; then
    row tests $((SECONDS - start)) "$counts; $skipped skipped"
  else
    row tests $((SECONDS - start)) "FAILED: $counts; $skipped skipped (see $log)"
    grep -A3 'The following tests FAILED' "$log" >&2 || tail -n 30 "$log" >&2
    exit 1
  fi
}
