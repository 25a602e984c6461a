"""Feishu / Lark platform (lark-oapi): card 2.0 delivery, callbacks, long connection.

Entry point for ``askhuman serve``: ``build_feishu_platform(settings, engine)``.
"""

from bot.platforms.feishu.config import FeishuConfig, FeishuConfigError
from bot.platforms.feishu.platform import (
    HTTP_PATH,
    FeishuPlatform,
    build_feishu_platform,
    feishu_configured,
)

__all__ = [
    "HTTP_PATH",
    "FeishuConfig",
    "FeishuConfigError",
    "FeishuPlatform",
    "build_feishu_platform",
    "feishu_configured",
]
