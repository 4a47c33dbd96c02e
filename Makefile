# logstream — the two commands of the README:
#   make run    set up everything, then the main job: the real NASA day replayed live through
#               the streaming pipeline onto the dashboard (http://127.0.0.1:8050); Ctrl-C
#               stops it, DURATION=90s stops it after that long; RUN_ARGS="..." adds
#               options of 'logstream run' (e.g. RUN_ARGS="--port 8060")
#   make test   set up everything, then run the test suite
#   make kafka  a one-node Apache Kafka broker on 127.0.0.1:9092 (KRaft) until Ctrl-C, its
#               files in out/kafka (docs/kafka.md)
#   make connect  a Spark Connect server from PySpark's jars on 127.0.0.1:15002 until Ctrl-C,
#               its log in out/connect (docs/cluster.md)
# Set-up is idempotent: a virtual environment in .venv (pip and setuptools upgraded: those
# Python 3.11's venv brings have published advisories), Java 17 and Maven via apt-get when
# missing, the JVM's class-data archive in ~/.cache/logstream/jvm (python -m
# logstream.pipeline.archive; once, about a minute), and Spark's Kafka connector and Apache
# Kafka's jars in ~/.cache/logstream/maven (python -m logstream.kafka.maven; once, about 15 s).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# two pytest-xdist workers (one on a 1-core machine), each test module on one worker so its
# module fixtures run once (a third worker on 2 cores: 30:42 against 26:54, the suite is bound
# by the CPU of its JVMs); the 25 slowest tests are listed at the end of a run (the suite must
# stay under 20 minutes)
PYTEST_ARGS ?= --numprocesses=auto --maxprocesses=2 --dist=loadfile --no-loadscope-reorder --durations=25
STAMP  := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)
export LOGSTREAM_DATA_DIR ?= $(abspath ../shared/data)
NASA_DAY := $(LOGSTREAM_DATA_DIR)/NASA_access_log_Jul95_day09.log.gz
OUT    ?= out

.PHONY: setup run report test lint bench package clean kafka connect

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip setuptools
	$(PY) -m pip install --quiet -e ".[test]"
	rm -f $(VENV)/.installed-*
	touch $@

setup: $(STAMP)
	@scripts/ensure-java.sh
	@scripts/ensure-maven.sh
	@$(PY) -m logstream.kafka.maven 2>$(VENV)/kafka-jars.log || { cat $(VENV)/kafka-jars.log >&2; exit 1; }
	@$(PY) -m logstream.pipeline.archive 2>$(VENV)/jvm-archive.log

kafka: setup
	$(PY) -m logstream.kafka.broker run --dir $(OUT)/kafka

connect: setup
	$(VENV)/bin/logstream connect-server --dir $(OUT)/connect

run: setup
	$(VENV)/bin/logstream run $(if $(DURATION),--duration $(DURATION)) $(RUN_ARGS)

report: setup
	mkdir -p $(OUT)
	$(VENV)/bin/logstream batch $(NASA_DAY) --json $(OUT)/nasa-day.json --html $(OUT)/nasa-day.html

package:
	mkdir -p dist
	cd src && $(PYTHON) -m zipfile -c ../dist/logstream.zip logstream/

test: setup
	@scripts/ensure-chromium.sh
	PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 $(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check src tests bench
	$(VENV)/bin/ruff format --check src tests bench

bench: setup
	$(PY) bench/bench_batch.py

clean:
	rm -rf $(OUT) dist .pytest_cache .ruff_cache
