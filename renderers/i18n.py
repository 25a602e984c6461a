"""One message catalog for the chrome askhuman writes on cards, in ``en`` and ``zh-CN``.

Chrome is what askhuman itself says around the model's request: statuses, "Due",
"From", placeholders, confirm dialogs, reminders. Model-written text (titles,
questions, labels, options) is never translated. The locale and time zone come
from the request's route (``locale: zh-CN``, ``timezone: Asia/Shanghai``); an
unknown locale falls back to ``en``.

Renderers read the current locale from a context variable that their public entry
points set from the card (``@localized``), so inner helpers need no extra argument.
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_LOCALE = "en"
LOCALES = ("en", "zh-CN")

CATALOG: dict[str, dict[str, str]] = {
    "en": {
        "status.pending": "Waiting for a response",
        "status.submitted": "Answered",
        "status.timeout": "Timed out",
        "status.cancelled": "Cancelled",
        "status.unavailable": "Unavailable",
        "yes": "Yes",
        "no": "No",
        "someone_on": "someone on {platform}",
        "by": " — by {who}",
        "by_short": " by {who}",
        "at": " at {when}",
        "due": "Due {when}",
        "due_paren": " (due {when})",
        "from": "From {agent}",
        "from_colon": "From: {agent}",
        "due_colon": "Due: {when}",
        "votes_colon": "Votes: {votes}/{quorum}",
        "urgent_text": "[URGENT] ",
        "fields": "Fields:",
        "actions": "Actions:",
        "votes": "Votes {votes}/{quorum}",
        "call_hash": "Call hash {hash}",
        "urgency.normal": "Normal urgency",
        "urgency.high": "High urgency",
        "urgent": "Urgent",
        "urgent_tag": "[Urgent] ",
        "asks": "{subject} — {agent} asks for your input",
        "reminder": "Reminder {number}: this request from {agent} is still waiting for an "
                    "answer{due}.",
        "pick_date": "Pick a date",
        "choose_options": "Choose options",
        "choose_option": "Choose an option",
        "options_shown": "Showing the first {shown} of {total} options.",
        "attach_files_button": "Attach files…",
        "attach_files": "Attach files",
        "upload": "Upload",
        "cancel": "Cancel",
        "are_you_sure": "Are you sure?",
        "this_will": "This will {action}.",
        "no_file_fields": "This request has no file fields.",
        "no_arguments": "No arguments.",
        "required": " (required)",
        "when_format": "%Y-%m-%d %H:%M {tz}",
        "click.received": "Received — recording your answer. The card will show the outcome.",
        "click.about": "About your answer on an askhuman card: {text}",
    },
    "zh-CN": {
        "status.pending": "等待回复",
        "status.submitted": "已回复",
        "status.timeout": "已超时",
        "status.cancelled": "已取消",
        "status.unavailable": "无法处理",
        "yes": "是",
        "no": "否",
        "someone_on": "{platform} 上的某人",
        "by": " — {who}",
        "by_short": "，处理人 {who}",
        "at": "，时间 {when}",
        "due": "截止 {when}",
        "due_paren": "（截止 {when}）",
        "from": "来自 {agent}",
        "from_colon": "来自：{agent}",
        "due_colon": "截止：{when}",
        "votes_colon": "票数：{votes}/{quorum}",
        "urgent_text": "【紧急】",
        "fields": "字段：",
        "actions": "操作：",
        "votes": "票数 {votes}/{quorum}",
        "call_hash": "调用哈希 {hash}",
        "urgency.normal": "普通",
        "urgency.high": "紧急",
        "urgent": "紧急",
        "urgent_tag": "【紧急】",
        "asks": "{subject} — {agent} 请你处理",
        "reminder": "提醒 {number}：来自 {agent} 的请求仍在等待回复{due}。",
        "pick_date": "选择日期",
        "choose_options": "选择选项（可多选）",
        "choose_option": "选择一个选项",
        "options_shown": "仅显示前 {shown} 个选项（共 {total} 个）。",
        "attach_files_button": "上传文件…",
        "attach_files": "上传文件",
        "upload": "上传",
        "cancel": "取消",
        "are_you_sure": "确定吗？",
        "this_will": "此操作将执行：{action}。",
        "no_file_fields": "此请求没有文件字段。",
        "no_arguments": "无参数。",
        "required": "（必填）",
        "when_format": "%Y-%m-%d %H:%M {tz}",
        "click.received": "已收到，正在记录你的回复。卡片会显示结果。",
        "click.about": "关于你在 askhuman 卡片上的回复：{text}",
    },
}

_current: ContextVar[tuple[str, str | None]] = ContextVar("askhuman_locale",
                                                           default=(DEFAULT_LOCALE, None))
P = ParamSpec("P")
R = TypeVar("R")


def normalize(locale: str | None) -> str:
    """``zh``, ``zh_CN``, ``zh-cn`` → ``zh-CN``; anything unknown → ``en``."""
    if not locale:
        return DEFAULT_LOCALE
    key = locale.replace("_", "-").lower()
    if key.startswith("zh"):
        return "zh-CN"
    return DEFAULT_LOCALE


def t(key: str, **values: Any) -> str:
    """The current locale's text for ``key`` (``en`` when it has none)."""
    locale, _tz = _current.get()
    text = CATALOG.get(locale, {}).get(key) or CATALOG[DEFAULT_LOCALE][key]
    return text.format(**values) if values else text


def say(locale: str | None, key: str, **values: Any) -> str:
    """``t(key)`` in ``locale`` (for texts outside a card: toasts, direct messages)."""
    with speaking(locale):
        return t(key, **values)


def status_word(status: str) -> str:
    return t(f"status.{status}")


def current_locale() -> str:
    return _current.get()[0]


@contextmanager
def speaking(locale: str | None, timezone: str | None = None) -> Iterator[None]:
    """Render in ``locale`` with dates in ``timezone`` inside the block."""
    token = _current.set((normalize(locale), timezone))
    try:
        yield
    finally:
        _current.reset(token)


def localized(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorate a renderer entry point whose first argument is the card: it renders in
    the card's locale and time zone (cards without them: ``en``, UTC)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        card = args[0] if args else None
        with speaking(getattr(card, "locale", None), getattr(card, "timezone", None)):
            return fn(*args, **kwargs)

    return wrapper


def format_when(moment: dt.datetime) -> str:
    """A deadline or decision time in the current time zone (UTC unless the route sets
    ``timezone``); naive datetimes are taken as UTC."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)
    zone_name = _current.get()[1]
    zone: dt.tzinfo = dt.UTC
    label = "UTC"
    if zone_name:
        try:
            zone = ZoneInfo(zone_name)
            local = aware.astimezone(zone)
            minutes = int((local.utcoffset() or dt.timedelta(0)).total_seconds()) // 60
            hours, rest = divmod(abs(minutes), 60)
            label = f"UTC{'-' if minutes < 0 else '+'}{hours}" + (f":{rest:02d}" if rest else "")
        except (ZoneInfoNotFoundError, ValueError):
            zone = dt.UTC
    return aware.astimezone(zone).strftime(t("when_format").replace("{tz}", label))
