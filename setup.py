"""Installs `kernels/` as `baer_fast.kernels` beside the pure-Python package.

pyproject.toml holds the metadata; this file only maps the top-level `kernels/`
folder into the package namespace (setuptools cannot express that in TOML alone
alongside `packages.find`).
"""
from setuptools import find_namespace_packages
from setuptools import setup

# Namespace discovery lists the demo's data folders (baer_fast/data/...) as packages too, as
# setuptools asks for folders that ship files; plain find_packages leaves them out and warns.
packages = find_namespace_packages(include=["baer_fast", "baer_fast.*"]) + ["baer_fast.kernels"]
setup(packages=packages, package_dir={"baer_fast.kernels": "kernels"})
