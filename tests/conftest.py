"""Suite-wide settings. Under CI (CI=true) hypothesis runs derandomized, so a green run is
reproducible and a red one names the same failing example on a rerun; locally it explores."""
import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
