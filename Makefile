# The two commands of the README: `make demo` (set up, dissect a shipped capture) and `make test`
# (set up, install the tools the tests compare against, run the whole suite).
VENV    ?= .venv
PY      := $(VENV)/bin/python
CAPTURE ?= captures/librdkafka_produce_consume.pcap
EXTRAS  ?= analysis,codecs,live,spark,tui,tls,dev
# The demo's own environment: the core alone, installed as a user installs it (no extras, no
# PySpark or test clients, and none of the editable install's build warnings).
DEMO_VENV ?= .venv-demo
SOURCES := pyproject.toml setup.py $(shell find dissector -name '*.py' -o -name '*.c')

.PHONY: setup system-deps demo test fuzz fuzz-asan codegen bench

$(VENV)/.installed: pyproject.toml setup.py $(wildcard dissector/_*.c dissector/*/_*.c)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# compat: the project's path in a .pth file; the default editable finder is imported at
	# every interpreter start (11 ms of CPU, 3% of reading a 400 MB capture's headers)
	$(PY) -m pip install -q -e '.[$(EXTRAS)]' --config-settings editable_mode=compat
	touch $@

$(DEMO_VENV)/.installed: $(SOURCES)
	python3 -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/python -m pip install -q --upgrade pip
	$(DEMO_VENV)/bin/python -m pip install -q .
	touch $@

setup: $(VENV)/.installed

system-deps:
	bash scripts/system-deps.sh

demo: $(DEMO_VENV)/.installed
	$(DEMO_VENV)/bin/kafka-dissect read $(CAPTURE)

test: system-deps setup
	$(PY) -m pytest -q -n 2 --durations=15

codegen: setup
	$(PY) -m dissector.codegen

fuzz: setup
	bash scripts/fuzz.sh

fuzz-asan: system-deps setup
	bash scripts/fuzz_asan.sh

bench: system-deps setup
	$(PY) benchmarks/vs_tshark.py --size-mb 400 --rounds 3 --mix bulk --records
	$(PY) benchmarks/vs_tshark.py --size-mb 400 --rounds 3 --mix dense --records
	$(PY) benchmarks/vs_tshark.py --size-mb 200 --rounds 3 --mix small --records
	$(PY) benchmarks/vs_tshark_tls.py --size-mb 150 --rounds 3
	$(PY) benchmarks/jobs_scaling.py --size-mb 400 --rounds 5
	$(PY) benchmarks/jobs_scaling.py --size-mb 400 --rounds 3 --mix dense --levels bodies,records
	$(PY) benchmarks/jobs_scaling.py --size-mb 400 --rounds 3 --mix dense --one-host \
		--levels bodies,records
	$(PY) benchmarks/jobs_scaling.py --size-mb 600 --rounds 3 --levels records \
		--source captures/librdkafka_produce_consume.pcap
	$(PY) benchmarks/connection_storm.py --rounds 3
