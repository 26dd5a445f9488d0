# Privacy odometer: `make run` starts the service, `make test` runs the whole suite.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
HOST   ?= 127.0.0.1
PORT   ?= 8000
WORKERS ?= 1
KEY_FILE := .odometer-admin-key
# The checkpoint signing key `make run` signs with unless ODOMETER_CHECKPOINT_KEY is set (its
# public key beside it, for `odometer verify --public-key`)
SIGNING_KEY_FILE := .odometer-checkpoint-key

.PHONY: run test test-adapters adapters-env test-tumult tumult-env browser-deps lint openapi client-generated install dev dist lock install-locked bench bench-accounting bench-blocks bench-capacity bench-caps bench-grids bench-ladder bench-quote bench-worst-case bench-proofs bench-ledger-verify bench-service bench-http-floor bench-write-path bench-write-path-count bench-witness bench-read-replica bench-prepare-threshold bench-compare

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Three distributions of one repository, installed editable in one resolver run: the server
# (.), the accounting core and verifier (./core) and the client (./client). A stamp in the venv
# keeps `make run` and `make test` from reinstalling while no pyproject.toml changed.
PYPROJECTS := pyproject.toml core/pyproject.toml client/pyproject.toml

$(VENV)/.installed: $(PYPROJECTS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ./client -e ./core -e .
	@touch $@

$(VENV)/.installed-dev: $(PYPROJECTS) | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e ./client -e ./core -e '.[dev]'
	@touch $@ $(VENV)/.installed

install: $(VENV)/.installed

dev: $(VENV)/.installed-dev

## install-locked: the same installation as `make install`, pinned: every third-party
## distribution from requirements.lock (hash-checked, no resolution beyond the file), then the
## three distributions of this checkout, editable, with nothing more to fetch (`make
## install-locked run` serves on the locked versions)
install-locked: | $(BIN)/python
	$(BIN)/python -m pip install --quiet --require-hashes -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e ./client -e ./core -e .
	$(BIN)/python -m pip check
	@touch $(VENV)/.installed

## lock: regenerate requirements.lock from the three pyproject.toml files (uv, from the dev extra;
## needs the package index). Pins already in the file are kept unless LOCK_ARGS=--upgrade or
## LOCK_ARGS='--upgrade-package NAME'
lock: dev
	printf '%s\n' ./client ./core . 'setuptools>=70.1' | $(BIN)/uv pip compile - --quiet \
	  --universal --python-version 3.11 --generate-hashes \
	  --no-emit-package privacy-odometer --no-emit-package privacy-odometer-core \
	  --no-emit-package privacy-odometer-client \
	  --custom-compile-command 'make lock' $(LOCK_ARGS) -o requirements.lock

## dist: the wheels of the three distributions in dist/ (emptied first): the server, the core and
## the client; `pip install dist/*.whl` installs the server (docs/install.md)
dist: | $(BIN)/python
	rm -rf dist build core/build client/build
	$(BIN)/python -m pip wheel --quiet --no-deps -w dist ./client ./core .

## run: migrate the database (SQLite ./odometer.db unless DATABASE_URL is set) and serve, signing
## ledger heads with $(SIGNING_KEY_FILE) (made once, mode 0600) unless ODOMETER_CHECKPOINT_KEY is set
run: install
	$(BIN)/alembic upgrade head
	@if [ -n "$$ODOMETER_ADMIN_KEY" ]; then key="$$ODOMETER_ADMIN_KEY"; \
	else \
	  [ -s $(KEY_FILE) ] || (umask 077; $(BIN)/python -c 'import secrets; print("odo_admin_" + secrets.token_urlsafe(24))' > $(KEY_FILE)); \
	  key="$$(cat $(KEY_FILE))"; \
	  echo "ODOMETER_ADMIN_KEY not set: using the demo admin key stored in $(KEY_FILE)"; \
	fi; \
	if [ -n "$$ODOMETER_CHECKPOINT_KEY" ]; then signing="$$ODOMETER_CHECKPOINT_KEY"; \
	else \
	  [ -s $(SIGNING_KEY_FILE) ] || $(BIN)/python -m app.cli checkpoint-keygen --force \
	    -o $(SIGNING_KEY_FILE) > $(SIGNING_KEY_FILE).pub || exit 1; \
	  signing="$(SIGNING_KEY_FILE)"; \
	fi; \
	echo "Privacy odometer:  http://$(HOST):$(PORT)"; \
	echo "Dashboard:         http://$(HOST):$(PORT)/dashboard"; \
	echo "API docs:          http://$(HOST):$(PORT)/docs"; \
	echo "Admin key:         $$key"; \
	echo "Database:          $${DATABASE_URL:-sqlite:///./odometer.db}"; \
	echo "Signing key:       $$signing (exports end with a signed head)"; \
	ODOMETER_ADMIN_KEY="$$key" ODOMETER_CHECKPOINT_KEY="$$signing" exec $(BIN)/python -m app.serve \
	  --host $(HOST) --port $(PORT) --workers $(WORKERS)

## test: the whole suite, then the adapters' tests in $(ADAPTERS_VENV) (PostgreSQL too when ODOMETER_TEST_POSTGRES_URL or DATABASE_URL is set;
## the browser tests are skipped, saying why, when no Chromium is installed: `make browser-deps`).
## TEST_WORKERS processes share the files (pytest-xdist, a file's tests in one process): most
## tests wait on servers, databases and fsync, so a second process fills the idle core (a third
## ran the suite faster, but left timing tests, such as a 50 ms p99, too little CPU)
## (docs/development.md, *Tests*); TEST_WORKERS=0 runs everything in this process. The slowest
## files start first (tests/conftest.py, SLOW_FILES_FIRST); the run ends with its 25 slowest
## tests, the figures that list is kept by.
TEST_WORKERS ?= 2
test: dev adapters-env tumult-env
	$(BIN)/python -m pytest --durations=25 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)
	$(ADAPTERS_VENV)/bin/python -m pytest -q tests/adapters
	$(TUMULT_TEST)

## adapters-env: $(ADAPTERS_VENV), where the adapters' real-library tests run (tests/adapters/):
## PipelineDP from requirements-adapters.txt (--no-deps, hash-checked) in a venv that reads the
## project's $(VENV) behind its own packages (a .pth line), so numpy, scipy and dp-accounting are
## requirements.lock's and the main venv never gets PipelineDP. About 2 s and 10 MB (3.4 MB of
## wheels); `make run` does not need it.
## Opacus and PyTorch's CPU wheel from requirements-opacus.txt (torch pinned to 2.13.0+cpu, a
## version only the local wheel has: never the CUDA build): about 47 s and 870 MB (193 MB of wheels);
## with it PyTorch Lightning 2.6.6 (--no-deps, so no second torch): 5 s and 17 MB more
ADAPTERS_VENV ?= .venv-adapters
$(ADAPTERS_VENV)/.installed: requirements-adapters.txt requirements-opacus.txt $(VENV)/.installed-dev
	rm -rf $(ADAPTERS_VENV)
	$(BIN)/python -m venv --without-pip $(ADAPTERS_VENV)
	$(BIN)/python -c 'import sysconfig; print("import site; site.addsitedir(%r)" % sysconfig.get_path("purelib"))' \
	  > "$$($(ADAPTERS_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_path("purelib"))')/_odometer_venv.pth"
	$(ADAPTERS_VENV)/bin/python -m pip install --quiet --no-deps --require-hashes -r requirements-adapters.txt
	$(ADAPTERS_VENV)/bin/python -m pip install --quiet --no-deps --require-hashes -r requirements-opacus.txt
	$(ADAPTERS_VENV)/bin/python -m pip check
	@touch $@

adapters-env: $(ADAPTERS_VENV)/.installed

## test-adapters: the adapters' tests with the real libraries, in $(ADAPTERS_VENV) (`make test`
## runs them after the suite; in $(VENV) they are skipped)
test-adapters: adapters-env
	$(ADAPTERS_VENV)/bin/python -m pytest -q tests/adapters

## tumult-env: $(TUMULT_VENV), Tumult Analytics' own venv, where its adapter's real-library tests
## run (tests/adapters_tumult/): tmlt.analytics 0.21 pins numpy < 2 and pandas < 2, where
## requirements.lock has numpy 2, so it shares nothing with $(VENV). Everything from
## requirements-tumult.txt (hash-checked; httpx at the lock's versions), then the client, editable,
## with --no-deps; the service those tests talk to runs from $(VENV). About 1.1 GB (pyspark is an
## sdist of 317 MB, built once); 95 s to build with an empty pip cache. Spark needs Java 17
## (Debian's openjdk-17-jre-headless; .ci/run installs it). `make run` does not need it
TUMULT_VENV ?= .venv-tumult
$(TUMULT_VENV)/.installed: requirements-tumult.txt client/pyproject.toml | $(BIN)/python
	rm -rf $(TUMULT_VENV)
	$(BIN)/python -m venv $(TUMULT_VENV)
	$(TUMULT_VENV)/bin/python -m pip install --quiet --require-hashes -r requirements-tumult.txt
	$(TUMULT_VENV)/bin/python -m pip install --quiet --no-deps --no-build-isolation -e ./client
	$(TUMULT_VENV)/bin/python -m pip check
	@touch $@

tumult-env: $(TUMULT_VENV)/.installed

## test-tumult: the Tumult adapter's tests with the real library, in $(TUMULT_VENV), with Spark's
## workers on that venv's Python (PYSPARK_PYTHON); only that directory's conftest is read (the
## suite's needs the server's packages, which that venv does not have; the suite's warning filters
## name starlette, which it does not have either: warnings are errors as there). One Spark session for
## the module: about 40-60 s. `make test` runs them after the suite
TUMULT_TEST = PYSPARK_PYTHON="$(abspath $(TUMULT_VENV))/bin/python" $(TUMULT_VENV)/bin/python -m pytest -q \
	  -p no:cacheprovider -o filterwarnings=error --confcutdir=tests/adapters_tumult tests/adapters_tumult
test-tumult: tumult-env dev
	$(TUMULT_TEST)

## browser-deps: the system Chromium the dashboard's and the API docs' browser tests drive
## (Debian's package; needs root; .ci/run calls it). Playwright never downloads a browser here.
browser-deps:
	@if command -v chromium >/dev/null 2>&1; then echo "chromium: $$(command -v chromium)"; \
	else apt-get install -y -q chromium >/dev/null 2>&1 || \
	  { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	  command -v chromium || echo "chromium could not be installed: the browser tests will be skipped"; fi

## lint: ruff (check and format), mypy --strict over app, tests and benchmarks, layer contracts,
## and copied code: pylint's duplicate-code check fails on a copy of more than DUPLICATE_LINES
## similar lines (pylint's --min-similarity-lines reports only longer ones; comments,
## docstrings, imports and signatures not counted) in two places of the Python below.
## Generated code is left out: the sync client, made from the async one by unasync
## (client/odometer_client/_sync/), the declaration helpers (client/odometer_client/_declared.py),
## and build/ copies; the OpenAPI document and the client's contract.json are JSON, which it
## does not read. The threshold is today's longest copy (16 lines: a ledger entry's fields in
## core/odometer_core/ledger/entry.py and core/odometer_core/accounting/json_types.py), so that
## no copy grows past it (docs/development.md; tests/architecture/test_duplicate_code.py)
DUPLICATE_LINES ?= 16
LINTED := app core client tests migrations benchmarks examples
lint: dev
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache --no-logo
	$(BIN)/pylint --disable=all --enable=duplicate-code --min-similarity-lines=$(DUPLICATE_LINES) \
	  --recursive=y --persistent=n --score=n \
	  --ignore-paths='client/odometer_client/_sync/.*,client/odometer_client/_declared.py,.*/build/.*,build/.*' $(LINTED)

## openapi: regenerate the committed OpenAPI document and the client's copy of its schemas
openapi: dev
	$(BIN)/python -m app.cli openapi -o openapi/openapi.json
	$(BIN)/python client/generate.py

## client-generated: the sync client from the async source (unasync), the client's contract and
## its declaration helpers (from the OpenAPI document)
client-generated: dev
	$(BIN)/python client/generate.py

## bench: list the benchmarks (each runs as `python -m benchmarks NAME [ARGS]` or
## `make bench-NAME BENCH_ARGS=...`; `BENCH_ARGS=--help` shows a benchmark's options)
bench: dev
	$(BIN)/python -m benchmarks

## bench-accounting: admission latency, MTZ speed and tightness → benchmarks/RESULTS.md
bench-accounting: dev
	$(BIN)/python -m benchmarks accounting $(BENCH_ARGS)

## bench-blocks: what deciding a selection of 10^6 blocks costs in the core → benchmarks/RESULTS.md
bench-blocks: dev
	$(BIN)/python -m benchmarks blocks $(BENCH_ARGS)

## bench-caps: what an organisation cap admits in each currency, today's basic cap beside it → benchmarks/RESULTS.md
bench-caps: dev
	$(BIN)/python -m benchmarks caps $(BENCH_ARGS)

## bench-capacity: how many more fit, the search beside the loop of admit() up to 10^6 → benchmarks/RESULTS.md
bench-capacity: dev
	$(BIN)/python -m benchmarks capacity $(BENCH_ARGS)

## bench-grids: what rdp mode admits with its default and workload-aware grids → benchmarks/RESULTS.md
bench-grids: dev
	$(BIN)/python -m benchmarks grids $(BENCH_ARGS)

## bench-ladder: what anchoring a filter's ladder at creation costs and what budget changes buy → benchmarks/RESULTS.md
bench-ladder: dev
	$(BIN)/python -m benchmarks ladder $(BENCH_ARGS)

## bench-quote: the certified readings beside dp_accounting's PLD and RDP and the exact ε → benchmarks/RESULTS.md
bench-quote: dev
	$(BIN)/python -m benchmarks quote $(BENCH_ARGS)

## bench-worst-case: CPU time of one admission decision on adversarial declarations → benchmarks/RESULTS.md
bench-worst-case: dev
	$(BIN)/python -m benchmarks worst-case $(BENCH_ARGS)

## bench-proofs: a 10^6-entry ledger's inclusion and consistency proofs (served time, bytes, the stored roots' build) → benchmarks/RESULTS.md
bench-proofs: dev
	$(BIN)/python -m benchmarks proofs $(BENCH_ARGS)

## bench-ledger-verify: export and offline verification of a 10^6-entry ledger → benchmarks/RESULTS.md
bench-ledger-verify: dev
	$(BIN)/python -m benchmarks ledger-verify $(BENCH_ARGS)

## bench-service: service vs raw-database throughput, p50/p99, ledger growth → benchmarks/RESULTS.md
bench-service: dev
	$(BIN)/python -m benchmarks service $(BENCH_ARGS)

## bench-http-floor: raw baseline vs its transaction behind bare uvicorn vs the service → benchmarks/RESULTS.md
bench-http-floor: dev
	$(BIN)/python -m benchmarks http-floor $(BENCH_ARGS)

## bench-write-path: CPU per registration by build and group size, group commit over HTTP → benchmarks/RESULTS.md
bench-write-path: dev
	$(BIN)/python -m benchmarks write-path $(BENCH_ARGS)

## bench-write-path-count: user-space instructions per registration under callgrind, by build (BENCH_ARGS='--build REF --build .'), printed (needs valgrind)
bench-write-path-count: dev
	$(BIN)/python -m benchmarks write-path-count $(BENCH_ARGS)

## bench-witness: the witness's cost on the write path, no witness beside lag 0 and 1 s → benchmarks/RESULTS.md
bench-witness: dev
	$(BIN)/python -m benchmarks witness $(BENCH_ARGS)

## bench-read-replica: registrations/s beside heavy reads, none, on a streaming replica, on the primary → benchmarks/RESULTS.md
bench-read-replica: dev
	$(BIN)/python -m benchmarks read-replica $(BENCH_ARGS)

## bench-prepare-threshold: what psycopg's prepared statements off (prepare_threshold=none) cost a registration on PostgreSQL, printed
bench-prepare-threshold: dev
	$(BIN)/python -m benchmarks prepare-threshold $(BENCH_ARGS)

## bench-compare: two builds side by side (BENCH_ARGS='A B': git refs or checkouts), printed
bench-compare: dev
	$(BIN)/python -m benchmarks compare $(BENCH_ARGS)
