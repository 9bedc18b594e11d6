# Only here so setuptools builds the cffi shim (cffi_modules); all metadata is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["shim/build_shim.py:ffibuilder"])
