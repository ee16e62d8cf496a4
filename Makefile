# arcane-mcp. The two commands a fresh machine needs: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SIM_PORT ?= 3552
MCP_PORT ?= 8765
DEMO_KEY ?= arc_demo_simulator_key

.PHONY: install run test validate audit reference update-spec e2e bench simulate clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@$(BIN)/python -m pip install -q --upgrade pip
	@$(BIN)/python -m pip install -q -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

# Serve MCP over HTTP on 127.0.0.1 against ARCANE_URL, or against the bundled simulator.
run: install
	@set -e; \
	if [ -z "$$ARCANE_URL" ]; then \
	  echo "ARCANE_URL is not set: starting the bundled Arcane SIMULATOR with demo data (not a real Arcane) on 127.0.0.1:$(SIM_PORT)"; \
	  $(BIN)/interp simulate --port $(SIM_PORT) --api-key $(DEMO_KEY) & sim=$$!; \
	  trap 'kill $$sim 2>/dev/null' EXIT INT TERM; \
	  $(BIN)/python -c "import socket,time,sys;[time.sleep(0.2) for _ in range(100) if socket.socket().connect_ex(('127.0.0.1',$(SIM_PORT)))];" ; \
	  export ARCANE_URL=http://127.0.0.1:$(SIM_PORT) ARCANE_API_KEY=$(DEMO_KEY); \
	fi; \
	echo "MCP endpoint: http://127.0.0.1:$(MCP_PORT)/mcp   (health: http://127.0.0.1:$(MCP_PORT)/health)"; \
	echo 'Client config: {"mcpServers": {"arcane": {"type": "http", "url": "http://127.0.0.1:$(MCP_PORT)/mcp"}}}'; \
	$(BIN)/interp serve --http --listen 127.0.0.1:$(MCP_PORT)

test: install
	@$(BIN)/python -m pytest -q -p no:cacheprovider

validate: install
	@$(BIN)/interp validate rules/

audit: install
	@$(BIN)/interp audit

reference: install
	@$(BIN)/interp reference

update-spec: install
	@test -n "$$ARCANE_URL" || { echo "set ARCANE_URL to the Arcane to read /api/openapi.json from"; exit 2; }
	@$(BIN)/interp update-spec "$$ARCANE_URL"

# End-to-end scenarios against a REAL Arcane (opt-in; not part of make test).
e2e: install
	@test -n "$$ARCANE_URL" -a -n "$$ARCANE_API_KEY" || { echo "set ARCANE_URL and ARCANE_API_KEY of a real Arcane"; exit 2; }
	@$(BIN)/python -m pytest -q -p no:cacheprovider tests/real_arcane_e2e.py

bench: install
	@$(BIN)/python -m tests.bench

simulate: install
	@$(BIN)/interp simulate --port $(SIM_PORT)

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
