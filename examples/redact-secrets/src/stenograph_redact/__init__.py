"""stenograph-redact: a third-party stenograph handler that redacts secrets.

Installed, it is found through the ``stenograph.handlers`` entry point as ``redact-secrets``.
"""

from .handler import RedactSecrets, RedactSecretsSettings, SecretsRedacted
from .redactor import BUILTIN_RULES, Redactor

__version__ = "0.1.0"
__all__ = ["BUILTIN_RULES", "RedactSecrets", "RedactSecretsSettings", "Redactor", "SecretsRedacted"]
