#!/bin/sh
# Run a command (the server, a worker) with the memory allocator settings Compresso is measured with.
#
# Why: libvips allocates and frees large pixel buffers from many threads. glibc malloc, left to its
# defaults, keeps what was freed in one arena per thread and raises its mmap threshold after the first
# big free, so pixel buffers land inside the heaps and a server's resident memory ratchets up under mixed
# load and stays there when idle. Three settings fix that without changing the allocator:
#   MALLOC_ARENA_MAX=2          few arenas: less memory held, same speed on 2-4 cores;
#   MALLOC_MMAP_THRESHOLD_=128K a fixed threshold: every pixel buffer or tile of 128 KiB or more is its own
#                               mapping, returned to the system the moment libvips frees it;
#   MALLOC_TRIM_THRESHOLD_=128K free space at the top of a heap is given back beyond 128 KiB.
# Measured with `npm run bench:soak` against jemalloc (sharp's docs suggest it): these settings used
# less CPU a request and came back under 300 MiB after load, where jemalloc gave back more memory but
# cost 15-24 % of throughput. Figures: core/server/README.md ("Memory").
#
# COMPRESSO_ALLOCATOR=jemalloc preloads Debian's libjemalloc2 instead (with a background purging thread);
# COMPRESSO_ALLOCATOR=system runs glibc with nothing set. Values already in the environment win.
set -e
case "${COMPRESSO_ALLOCATOR:-glibc}" in
  system) exec "$@" ;;
  jemalloc)
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
        export MALLOC_CONF="${MALLOC_CONF:-background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0}"
        exec "$@"
      fi
    done
    echo "compresso: COMPRESSO_ALLOCATOR=jemalloc but libjemalloc2 is not installed (apt-get install libjemalloc2)" >&2
    exit 1
    ;;
  glibc) ;;
  *)
    echo "compresso: COMPRESSO_ALLOCATOR must be glibc (the default), jemalloc or system, not \"$COMPRESSO_ALLOCATOR\"" >&2
    exit 1
    ;;
esac
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
export MALLOC_MMAP_THRESHOLD_="${MALLOC_MMAP_THRESHOLD_:-131072}"
export MALLOC_TRIM_THRESHOLD_="${MALLOC_TRIM_THRESHOLD_:-131072}"
exec "$@"
