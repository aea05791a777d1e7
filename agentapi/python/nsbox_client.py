"""Deprecated: the one-file client became the `nsbox` package.

`pip install ./agentapi/python` and `import nsbox`. This shim keeps
`from nsbox_client import Client` working for one release; it needs the
package importable (installed, or this directory on sys.path).
"""

import warnings

from nsbox import *  # noqa: F401,F403
from nsbox import __all__  # noqa: F401

warnings.warn("nsbox_client is deprecated: import nsbox (pip install ./agentapi/python)", DeprecationWarning,
              stacklevel=2)
