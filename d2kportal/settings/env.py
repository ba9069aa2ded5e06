"""The one place where deploy-varying settings are read from the environment.

Every variable read here is listed in `.env.example` and documented in
`docs/settings.md`; `tests/test_docs.py` fails when one is not.
"""

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent.parent

env = environ.Env()
_dotenv = BASE_DIR / ".env"
if _dotenv.exists():
    environ.Env.read_env(str(_dotenv))
