# ephemail: disposable inboxes (SMTP in, JSON API, MCP, web pages) in one container.
#
#   docker build -t ephemail .
#   docker run --rm -p 8025:8025 -p 1025:1025 -v ephemail-data:/data ephemail
#
# docs/container.md has compose, CI `services:` snippets, podman notes and what the test checks
# (scripts/container-test.mjs builds and runs this file).
#
# Build arguments:
#   BASE_IMAGE           the Node.js image every stage starts from (default: the official
#                        node:24-bookworm-slim; a local stand-in works, see scripts/container-base.sh)
#   NODE_EXTRA_CA_CERTS  deps stage only (the one that downloads): a CA bundle for `npm ci` behind a TLS-inspecting proxy.
#                        Mount the file for the build, never COPY it:
#                          podman build -v /etc/ssl/certs/ca-certificates.crt:/run/host-ca/ca-certificates.crt:ro \
#                            --build-arg NODE_EXTRA_CA_CERTS=/run/host-ca/ca-certificates.crt .
#                        Nothing of it reaches the runtime stage.
ARG BASE_IMAGE=node:24-bookworm-slim

# ---- deps: production dependencies (rebuilt only when package.json or the lockfile change) -------
FROM ${BASE_IMAGE} AS deps
ARG NODE_EXTRA_CA_CERTS
WORKDIR /app
# - production dependencies only: the service runs the bundle (dist/) and needs no build tool;
#   esbuild, a dev dependency, is installed apart below, for the build stage only.
# - --ignore-scripts: no install script of any dependency is needed (better-sqlite3 13 ships its
#   prebuilt binaries in the package, esbuild finds its binary through @esbuild/<platform>); the
#   root `prepare` (the bundle) is the build stage below.
# - --workspaces=false: packages/client (@ephemail/client) is a client library, not part of the
#   service.
# - playwright*: the lockfile marks them devOptional (an optional peer of @ephemail/client), so
#   --omit=dev alone keeps them; the service never loads them.
# - better-sqlite3: only this platform's prebuilt binary is kept; its C sources are not needed.
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --workspaces=false --ignore-scripts --no-audit --no-fund \
 && rm -rf node_modules/playwright node_modules/playwright-core node_modules/@playwright \
 && node -e "const fs=require('fs'),p='node_modules/better-sqlite3/',keep=process.platform+'-'+process.arch+'.node';\
for(const f of fs.readdirSync(p+'prebuilds'))if(f!==keep)fs.rmSync(p+'prebuilds/'+f);\
if(!fs.existsSync(p+'prebuilds/'+keep))throw new Error('no prebuilt better-sqlite3 for '+keep);\
for(const d of ['deps','src','build'])fs.rmSync(p+d,{recursive:true,force:true})" \
 && node -e "new (require('better-sqlite3'))(':memory:').prepare('select 1').get()"
# esbuild for the build stage, at the lockfile's version, in /esbuild (not /app/node_modules: nothing of
# it reaches the runtime stage)
RUN mkdir /esbuild && cd /esbuild && echo '{"private":true}' > package.json \
 && npm install --ignore-scripts --no-package-lock --no-audit --no-fund \
      "esbuild@$(node -p "require('/app/package-lock.json').packages['node_modules/esbuild'].version")"

# ---- build: the bundle of src/ (scripts/build.mjs, what `npm ci`'s prepare does) ----------------
FROM ${BASE_IMAGE} AS build
WORKDIR /app
# esbuild is all the bundle needs (packages stay external); copying only it keeps this stage quick
COPY --from=deps /esbuild/node_modules node_modules
COPY package.json tsconfig.json ./
COPY scripts/build.mjs scripts/build.mjs
COPY src src
COPY bin bin
# dist/: bin/ephemail.js runs it and never builds; the runtime stage copies exactly the files its
# fingerprint is made of (src/, tsconfig.json, build.mjs), so it finds it current (no stale warning).
RUN node scripts/build.mjs && mkdir -p /data

# ---- runtime -------------------------------------------------------------------------------------
FROM ${BASE_IMAGE}
ENV NODE_ENV=production \
    EPHEMAIL_HTTP_HOST=0.0.0.0 \
    EPHEMAIL_HTTP_PORT=8025 \
    EPHEMAIL_SMTP_HOST=0.0.0.0 \
    EPHEMAIL_SMTP_PORT=1025 \
    EPHEMAIL_IMAP_HOST=0.0.0.0 \
    EPHEMAIL_IMAP_PORT=1143 \
    EPHEMAIL_POP3_HOST=0.0.0.0 \
    EPHEMAIL_POP3_PORT=1110 \
    EPHEMAIL_STORE=sqlite:/data/ephemail.db
WORKDIR /app
# Owned by root and read-only to the service's user; only /data is writable. No RUN in this stage:
# a build that mounts a file for RUN steps (the CA bundle above) would leave its mount point here.
# node_modules from deps (a layer reused until the lockfile changes), the bundle from build.
COPY --from=deps /app/node_modules node_modules
COPY --from=build /app/dist dist
COPY --from=build /app/package.json /app/tsconfig.json ./
COPY --from=build /app/scripts scripts
COPY --from=build /app/src src
COPY --from=build /app/bin bin
COPY --from=build --chown=node:node /data /data
USER node
VOLUME /data
EXPOSE 8025 1025 1143 1110
# No curl in the image: Node's fetch. Follows EPHEMAIL_HTTP_PORT if it is changed.
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.EPHEMAIL_HTTP_PORT||8025)+'/livez').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# node itself is PID 1 (not npm, not a shell): it gets docker stop's SIGTERM, answers held
# long-polls, lets SMTP transactions finish and exits 0.
# glibc's malloc: two arenas, not one per thread that allocates (libuv's pool, V8's helpers, the
# workers): ~5 MB of idle RSS (docs/architecture.md "Memory"); package.json's start sets the same.
ENV MALLOC_ARENA_MAX=2
CMD ["node", "--max-semi-space-size=4", "bin/ephemail.js", "serve"]
