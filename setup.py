# Only here so setuptools builds the cffi shim (cffi_modules); all metadata is in pyproject.toml.
from setuptools import setup
from setuptools.command.build_ext import build_ext


class OptionalShim(build_ext):
    """The C shim gives rdpmc and the self-test's workloads. Without a C compiler pmutop still installs: the
    msr read path, --demo and every view work, and pmutop says once at run time what is unavailable."""

    def build_extension(self, ext):  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as e:  # no compiler, no Python headers: any build failure
            print(
                f"WARNING: pmutop: the C shim was not built ({e}): rdpmc and the self-test's workloads are"
                " unavailable; install a C compiler (gcc) and the Python headers, then reinstall, to have them",
                flush=True,
            )


setup(cffi_modules=["shim/build_shim.py:ffibuilder"], cmdclass={"build_ext": OptionalShim})
