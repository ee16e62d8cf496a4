# arcane-mcp in HTTP mode (docs/packaging.md, docs/http.md). Builds from this checkout with nothing
# fetched but Python packages from the package index; runs as an unprivileged user (uid 10001).
#
#   docker build -t arcane-mcp .
#   docker run -p 127.0.0.1:8765:8765 -e ARCANE_URL=https://arcane.example.com arcane-mcp
#   (behind the TLS proxy that serves it; add its name with ARCANE_MCP_ALLOWED_HOSTS)
#
# The base is pinned by digest (the multi-platform index of python:3.11-slim; a tag moves, a
# digest does not). To move to a newer one, read the current digest with
#   docker buildx imagetools inspect python:3.11-slim
# and replace it on both FROM lines (tests/test_dockerfile.py checks the form and runs hadolint).
FROM python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff AS build
WORKDIR /src
# The dependency layer: the runtime dependencies pyproject.toml names, at the exact versions of
# constraints.txt (those make test runs), installed before any source is copied, so an edit
# of the code, the catalog or the rules rebuilds only the layers after it.
COPY pyproject.toml constraints.txt ./
RUN python -m venv /opt/arcane-mcp \
 && python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > runtime.txt \
 && /opt/arcane-mcp/bin/pip install --no-cache-dir -c constraints.txt -r runtime.txt
# The package itself, without its dependencies (all in the layer above; pip check says so).
COPY README.md ./
COPY interpreter ./interpreter
COPY simulator ./simulator
COPY catalog ./catalog
COPY rules ./rules
COPY compiled ./compiled
RUN /opt/arcane-mcp/bin/pip install --no-cache-dir --no-deps -c constraints.txt . \
 && /opt/arcane-mcp/bin/pip check

FROM python:3.11-slim@sha256:90744cff8f32887f075c47d747a173ff333e9e98801667af93c357fa9f5e28ff
# A numeric user: a pod with runAsNonRoot and no runAsUser accepts only a numeric USER.
RUN groupadd --system --gid 10001 arcane \
 && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /home/arcane --create-home --shell /usr/sbin/nologin arcane
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
USER 10001:10001
WORKDIR /home/arcane
EXPOSE 8765
# The unauthenticated health endpoint (200 while serving, 503 while draining), asked where the
# server listens: the address and the scheme come from the settings the server reads
# (interpreter.config: ARCANE_MCP_LISTEN, ARCANE_MCP_TLS_CERT), a wildcard bind is asked on
# loopback, and the certificate is not verified (the probe asks the container itself).
HEALTHCHECK --interval=30s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python", "-c", "import ssl, sys, urllib.request\nfrom interpreter.config import load_settings\ntry:\n    s = load_settings()\n    host, port = s.listen\n    host = {'0.0.0.0': '127.0.0.1', '::': '::1'}.get(host, host)\n    url = ('https' if s.tls_cert else 'http') + '://' + ('[' + host + ']' if ':' in host else host) + ':' + str(port) + '/health'\n    tls = ssl.create_default_context()\n    tls.check_hostname = False\n    tls.verify_mode = ssl.CERT_NONE\n    status = urllib.request.urlopen(url, timeout=4, context=tls).status\nexcept Exception as exc:\n    sys.exit('unhealthy: ' + str(exc))\nsys.exit(0 if status == 200 else 'unhealthy: HTTP ' + str(status))"]
ENTRYPOINT ["interp"]
CMD ["serve", "--http"]
