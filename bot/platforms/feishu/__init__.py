"""Feishu / Lark platform (lark-oapi): card 2.0 delivery, callbacks, long connection.

Entry point for ``askhuman serve``: ``build_feishu_platform(settings, engine)``.
"""

from importlib import import_module
from typing import Any

_EXPORTS = {
    "FeishuConfig": "config", "FeishuConfigError": "config", "HTTP_PATH": "platform",
    "FeishuPlatform": "platform", "build_feishu_platform": "platform",
    "feishu_configured": "platform",
}
"""Imported on first use (PEP 562): lark-oapi (~3 s, 10,000 modules) loads only when
Feishu runs."""


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{_EXPORTS[name]}"), name)


__all__ = [
    "HTTP_PATH",
    "FeishuConfig",
    "FeishuConfigError",
    "FeishuPlatform",
    "build_feishu_platform",
    "feishu_configured",
]
