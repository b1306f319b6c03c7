#!/bin/sh
# Run a command (the server, a worker) with jemalloc as the process's allocator when the system has it.
#
# Why: libvips allocates and frees large pixel buffers from many threads. glibc malloc keeps what was
# freed in per-thread arenas and returns little of it to the system, so a server's resident memory
# ratchets up under mixed load and stays there when idle. jemalloc with a background purging thread
# hands freed pages back within seconds (sharp's docs recommend it on glibc Linux). Measured with
# `npm run bench:soak`; numbers in core/server/README.md ("Memory").
#
# Without the library (apt-get install libjemalloc2 on Debian/Ubuntu) the command still runs, on glibc
# malloc with MALLOC_ARENA_MAX=2 (fewer arenas: less memory held at the same speed), and says so.
# COMPRESSO_ALLOCATOR=system skips jemalloc on purpose.
set -e
if [ "${COMPRESSO_ALLOCATOR:-jemalloc}" != "system" ]; then
  case "${LD_PRELOAD:-}" in
    *jemalloc*) exec "$@" ;;
  esac
  for lib in \
    /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 \
    /usr/lib/aarch64-linux-gnu/libjemalloc.so.2 \
    /usr/lib64/libjemalloc.so.2 \
    /usr/lib/libjemalloc.so.2 \
    /usr/local/lib/libjemalloc.so.2; do
    if [ -r "$lib" ]; then
      export LD_PRELOAD="$lib${LD_PRELOAD:+:$LD_PRELOAD}"
      # background_thread: purge while idle too (jemalloc otherwise purges only when called).
      # dirty_decay_ms 1 s, muzzy 0: hand freed pages back quickly rather than keep them warm.
      export MALLOC_CONF="${MALLOC_CONF:-background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0}"
      exec "$@"
    fi
  done
  echo "compresso: libjemalloc2 not found (apt-get install libjemalloc2): running on glibc malloc with MALLOC_ARENA_MAX=2, which holds more memory after load (see core/server/README.md, Memory)" >&2
fi
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
exec "$@"
