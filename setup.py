"""Installs `kernels/` as `baer_fast.kernels` beside the pure-Python package.

pyproject.toml holds the metadata; this file only maps the top-level `kernels/`
folder into the package namespace (setuptools cannot express that in TOML alone
alongside `packages.find`).
"""
from setuptools import setup
from setuptools import find_packages

packages = find_packages(include=["baer_fast", "baer_fast.*"]) + ["baer_fast.kernels"]
setup(packages=packages, package_dir={"baer_fast.kernels": "kernels"})
