# syntax=docker/dockerfile:1
# Node.js 24 on Debian 13 (trixie, glibc 2.41): the uWebSockets.js build for Node 22 and 24
# (@btc-vision/uwebsockets.js, an optional dependency) needs glibc 2.38 or later. src/http/uws.ts
# picks the first build that loads and logs which.
# Build stage: compile TypeScript (the server, and the agent SDK's package that `npm run build`
# builds beside it) and build the dashboard (dist/web) with the dev dependencies.
FROM node:24-trixie-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY src ./src
COPY schemas ./schemas
COPY web ./web
COPY packages/agent/package.json packages/agent/tsconfig.json ./packages/agent/
COPY scripts/build-web.mjs scripts/build-sdk-schemas.mjs ./scripts/
RUN npm run build

# Final stage: production dependencies (optional ones included) and compiled JavaScript only,
# as a non-root user.
FROM node:24-trixie-slim
ENV NODE_ENV=production \
    MALLOC_ARENA_MAX=2 \
    DATA_DIR=/data \
    PORT=8080 \
    HOST=0.0.0.0
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY schemas ./schemas
RUN groupadd --system steward && useradd --system --gid steward --home-dir /app steward \
    && mkdir -p /data && chown steward:steward /data
USER steward
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
STOPSIGNAL SIGTERM
CMD ["node", "--max-semi-space-size=4", "dist/src/cli/index.js", "serve"]
