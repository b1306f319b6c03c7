# The compresso command (API server and worker) on Node 24. TypeScript runs as it is (type
# stripping): there is no build step. Used by docker-compose.yml.
FROM node:24-bookworm-slim
WORKDIR /app
# jemalloc as the allocator, as scripts/with-jemalloc.sh sets it for `npm start`: libvips' freed pixel
# buffers go back to the system within seconds instead of staying in glibc's arenas (measured in
# core/server/README.md, Memory). The link gives one path on every architecture.
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2 \
  && rm -rf /var/lib/apt/lists/* \
  && ln -s "$(ls /usr/lib/*/libjemalloc.so.2 | head -n 1)" /usr/local/lib/libjemalloc.so.2
ENV NODE_ENV=production LD_PRELOAD=/usr/local/lib/libjemalloc.so.2 \
  MALLOC_CONF=background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0
COPY . .
# --ignore-scripts: the root `prepare` builds the Node client and MCP bundles with dev tools that
# --omit=dev leaves out, and the server does not need them; sharp uses its prebuilt package.
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force \
  && mkdir -p /data && chown node /data
USER node
EXPOSE 3000
ENTRYPOINT ["node", "core/cli/src/bin.ts"]
CMD ["serve"]
