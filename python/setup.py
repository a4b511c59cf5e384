"""pip install ./python: packages the accrue module that Accrue's CMake build
assembles in <build>/python_packages/accrue (the _accrue extension and
accrue/__init__.py), with libAccrueCAPI.so beside the extension, which finds
it there. The build is ACCRUE_BUILD_DIR (default: the repository's build/);
scripts/build runs first when the extension is not built yet."""
import glob
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BUILD = os.environ.get("ACCRUE_BUILD_DIR", os.path.join(ROOT, "build"))


class BuildFromCMake(build_py):
    def run(self):
        package = os.path.join(BUILD, "python_packages", "accrue")
        if not glob.glob(os.path.join(package, "_accrue*.so")):
            subprocess.check_call([os.path.join(ROOT, "scripts", "build")],
                                  env=dict(os.environ, ACCRUE_BUILD_DIR=BUILD))
        super().run()
        target = os.path.join(self.build_lib, "accrue")
        for path in glob.glob(os.path.join(package, "_accrue*.so")):
            shutil.copy2(path, target)
        shutil.copy2(os.path.join(BUILD, "lib", "libAccrueCAPI.so"), target)


setup(packages=["accrue"], cmdclass={"build_py": BuildFromCMake},
      zip_safe=False)
