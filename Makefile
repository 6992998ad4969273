# The two commands of the README: `make demo` (set up, dissect a shipped capture) and `make test`
# (set up, install the tools the tests compare against, run the whole suite).
VENV    ?= .venv
PY      := $(VENV)/bin/python
CAPTURE ?= captures/librdkafka_produce_consume.pcap
EXTRAS  ?= analysis,codecs,live,spark,dev

.PHONY: setup system-deps demo test fuzz codegen bench

$(VENV)/.installed: pyproject.toml $(wildcard dissector/*/_*.c)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $@

setup: $(VENV)/.installed

system-deps:
	bash scripts/system-deps.sh

demo: setup
	$(VENV)/bin/kafka-dissect read $(CAPTURE)

test: system-deps setup
	$(PY) -m pytest -q -n 2 --durations=15

codegen: setup
	$(PY) -m dissector.codegen

fuzz: setup
	bash scripts/fuzz.sh

bench: system-deps setup
	$(PY) benchmarks/vs_tshark.py --size-mb 400 --rounds 3 --mix bulk
	$(PY) benchmarks/vs_tshark.py --size-mb 400 --rounds 3 --mix dense
