"""What both lit suites (test/lit.cfg.py, test/e2e/lit.cfg.py) configure
alike: the CUDA toolkit feature and the features a run requires."""
import os

import cuda_toolkit


def add_cuda_toolkit(config):
    """The cuda-toolkit feature and %ptxas, where a toolkit is present
    (scripts/test makes sure one is)."""
    toolkit = cuda_toolkit.find(config.accrue_src_root)
    if toolkit:
        ptxas = os.path.join(toolkit, "bin", "ptxas")
        config.available_features.add("cuda-toolkit")
        config.substitutions.append(("%ptxas", ptxas))
        config.environment["ACCRUE_PTXAS"] = ptxas


def add_cpu_features(config):
    """`avx512bf16` where this CPU has AVX512-BF16 (accrue-compile then
    runs bf16 contractions on vdpbf16ps by default)."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
    except OSError:
        flags = []
    if "avx512_bf16" in flags:
        config.available_features.add("avx512bf16")


def require_features(config, lit_config, variable):
    """scripts/test installs everything the suite uses: there a missing
    feature named in `variable` is an install bug, not a reason to skip
    tests quietly."""
    for feature in filter(None, os.environ.get(variable, "").split(",")):
        if feature not in config.available_features:
            lit_config.fatal("feature '%s' is required (%s) but not available"
                             % (feature, variable))


def add_sanitizer(config):
    """An ACCRUE_SANITIZE build (scripts/test-sanitized): the `sanitizer`
    feature, symbolized reports, and the sanitizer settings of the
    environment passed through to the tools."""
    if not getattr(config, "accrue_sanitize", False):
        return
    config.available_features.add("sanitizer")
    symbolizer = os.path.join(config.llvm_tools_dir, "llvm-symbolizer")
    if os.path.exists(symbolizer):
        config.environment["ASAN_SYMBOLIZER_PATH"] = symbolizer
    for name in ["ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"]:
        if name in os.environ:
            config.environment[name] = os.environ[name]


def set_timeout(lit_config, seconds):
    """A test that hangs (a mutation made one loop forever for 13 minutes)
    fails after `seconds` instead of stalling the run. lit needs psutil to
    end a test's processes: Debian's python3-psutil (scripts/setup), also
    when lit runs under another build of the same Python version (a pyenv
    interpreter first on PATH); without it the suite runs without a
    limit."""
    import sys
    try:
        import psutil  # noqa: F401
    except ImportError:
        debian = "/usr/lib/python3/dist-packages"
        built = "_psutil_linux.cpython-%d%d" % sys.version_info[:2]
        folder = os.path.join(debian, "psutil")
        if os.path.isdir(folder) and any(n.startswith(built) for n in os.listdir(folder)):
            sys.path.append(debian)
        try:
            import psutil  # noqa: F401,F811
        except ImportError:
            lit_config.note("psutil is missing: no per-test timeout")
            return
    lit_config.maxIndividualTestTime = seconds
