"""Stand-in for `vllm/utils/__init__.py` (imports torch): `random_uuid` (uuid4 hex, as there).
Submodules (`collection_utils`, …) come from the wheel."""

import uuid


def random_uuid() -> str:
    return str(uuid.uuid4().hex)
