"""Finds a CUDA toolkit for the lit suites, where the compiler looks for one
(CUDA_HOME, CUDA_PATH, /usr/local/cuda, or the nvidia-cuda-nvcc wheel that
scripts/setup installs into the source tree's .venv): the directory with
nvvm/libdevice/libdevice.10.bc and bin/ptxas, or None."""
import glob
import os


def find(source_root):
    candidates = [os.environ.get(v) for v in ("CUDA_HOME", "CUDA_PATH")]
    candidates.append("/usr/local/cuda")
    candidates += glob.glob(os.path.join(source_root, ".venv", "lib", "python3*",
                                         "site-packages", "nvidia", "cuda_nvcc"))
    for root in filter(None, candidates):
        if (os.path.exists(os.path.join(root, "nvvm", "libdevice", "libdevice.10.bc"))
                and os.access(os.path.join(root, "bin", "ptxas"), os.X_OK)):
            return root
    return None
