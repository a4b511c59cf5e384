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


def require_features(config, lit_config, variable):
    """scripts/test installs everything the suite uses: there a missing
    feature named in `variable` is an install bug, not a reason to skip
    tests quietly."""
    for feature in filter(None, os.environ.get(variable, "").split(",")):
        if feature not in config.available_features:
            lit_config.fatal("feature '%s' is required (%s) but not available"
                             % (feature, variable))
