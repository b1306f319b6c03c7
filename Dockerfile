# The compresso command (API server and worker) on Node 24. TypeScript runs as it is (type
# stripping): there is no build step. Used by docker-compose.yml.
FROM node:24-bookworm-slim
WORKDIR /app
# glibc malloc as scripts/with-allocator.sh sets it for `npm start`: two arenas and a fixed 128 KiB mmap
# threshold, so libvips' freed pixel buffers go back to the system at once instead of staying in the
# arenas (measured against jemalloc in core/server/README.md, Memory).
ENV NODE_ENV=production MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072
COPY . .
# --ignore-scripts: the root `prepare` builds the Node client and MCP bundles with dev tools that
# --omit=dev leaves out, and the server does not need them; sharp uses its prebuilt package.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force \
  && mkdir -p /data && chown node /data
USER node
EXPOSE 3000
ENTRYPOINT ["node", "core/cli/src/bin.ts"]
CMD ["serve"]
