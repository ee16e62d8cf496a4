# arcane-mcp in HTTP mode (docs/packaging.md, docs/http.md). Builds from this checkout with nothing
# fetched but Python packages from the package index; runs as an unprivileged user.
#
#   docker build -t arcane-mcp .
#   docker run -p 127.0.0.1:8765:8765 -e ARCANE_URL=https://arcane.example.com arcane-mcp
#   (behind the TLS proxy that serves it; add its name with ARCANE_MCP_ALLOWED_HOSTS)
#
# The base is pinned to an exact release (tests/test_dockerfile.py checks the rules).
FROM python:3.11.10-slim-bookworm AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY interpreter ./interpreter
COPY simulator ./simulator
COPY catalog ./catalog
COPY rules ./rules
COPY compiled ./compiled
# the exact versions make test runs (constraints.txt), installed into a venv to copy over
RUN python -m venv /opt/arcane-mcp \
 && /opt/arcane-mcp/bin/pip install --no-cache-dir -c constraints.txt .

FROM python:3.11.10-slim-bookworm
RUN groupadd --system --gid 10001 arcane \
 && useradd --system --uid 10001 --gid arcane --home-dir /home/arcane --create-home --shell /usr/sbin/nologin arcane
COPY --from=build /opt/arcane-mcp /opt/arcane-mcp
# A bind other than loopback needs TLS or the operator's word that a proxy terminates it
# (httpmode.check_posture): the image says a TLS proxy (an ingress, a sidecar) stands in
# front. To serve HTTPS itself, mount a certificate and set ARCANE_MCP_TLS_CERT and
# ARCANE_MCP_TLS_KEY (docs/packaging.md).
ENV PATH=/opt/arcane-mcp/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ARCANE_MCP_LISTEN=0.0.0.0:8765 \
    ARCANE_MCP_BEHIND_TLS_PROXY=true \
    ARCANE_MCP_AUDIT_LOG=stderr
USER arcane:arcane
WORKDIR /home/arcane
EXPOSE 8765
# the unauthenticated health endpoint: 200 while serving, 503 while draining
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8765/health', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["interp"]
CMD ["serve", "--http"]
