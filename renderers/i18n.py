"""One message catalog for the chrome askhuman writes on cards, in ``en`` and ``zh-CN``.

Chrome is what askhuman itself says around the model's request: statuses, "Due",
"From", placeholders, confirm dialogs, reminders. Model-written text (titles,
questions, labels, options) is never translated. The locale and time zone come
from the request's route (``locale: zh-CN``, ``timezone: Asia/Shanghai``); an
unknown locale falls back to ``en``.

Renderers read the current locale from a context variable that their public entry
points set from the card (``@localized``), so inner helpers need no extra argument.

What askhuman tells one person (refusals, toasts, "already decided") is a message key
with parameters, ``renderers.words.Said``, rendered in the person's locale from these
keys and the sentence catalogues (``catalog_en``, ``catalog_zh``).
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
        "links_to": "links to {host}",
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
        "progress": "{votes} of {quorum} approvals: {who}",
        "choice": "{who} ({choice})",
        "signoffs": "Sign-off: {groups}",
        "signed": "{group} \u2713",
        "unsigned": "{group} (waiting)",
        "reason_label": "Reason",
        "reason_placeholder": "Why (required for some choices; the agent and the audit get it)",
        "decided.timeout": "Timed out: no decision",
        "escalated_to": "Escalated to {routes}",
        "reminded_at": "Last reminded {when}",
        "tool.title": "Approve tool call: {tool}",
        "tool.question": "The agent {agent} wants to run {tool} with the arguments below. "
                         "Approve runs exactly this call once; Reject stops it (the reason, "
                         "if you give one, is passed to the agent).",
        "tool.reason": "Reason (optional)",
        "tool.reason_hint": "Why, for the agent and the audit",
        "tool.approve": "Approve",
        "tool.reject": "Reject",
        "tool.wants_to_run": "{agent} wants to run {tool}",
        "tool.arguments": "Arguments:",
        "tool.fixed": "(fixed by admin)",
        "tool.more_chars": "(+{count} characters)",
        "tool.more_args": "{count} more argument(s) not shown",
        "tool.grant": "Approve and allow similar…",
        "tool.grant_question": "Approve and allow similar… also approves later calls of {tool} "
                               "by {agent} {similar} for the time and number of uses chosen "
                               "below, without asking.",
        "tool.grant_exact": "with exactly these arguments",
        "tool.grant_scope": "where {scope}",
        "tool.grant_duration": "Allow similar calls for",
        "tool.grant_uses": "Uses allowed",
        "tool.approve_edit": "Edit and approve",
        "tool.edited": "{changes}, edited by {who}",
        "edit.title": "Edit and approve",
        "edit.submit": "Approve",
        "edit.intro": "Change the arguments below, then approve the edited call of {tool}.",
        "edit.json_hint": "JSON value",
        "hint.options": "options",
        "hint.any": "choose any",
        "hint.min": "min {value}",
        "hint.max": "max {value}",
        "hint.number": "number",
        "hint.file": "file upload",
        "hint.up_to": "(up to {count})",
        "hint.checkbox": "yes / no",
        "hint.date": "date (YYYY-MM-DD)",
        "hint.text": "text",
        "feishu.file_reply": "reply in this card's thread with the file.",
        "default": "[default: {value}]",
        "call_hash_colon": "Call hash: {hash}",
        "style.primary": " [primary]",
        "style.destructive": " [destructive]",
        "pending.none": "Nothing is waiting for you.",
        "pending.count": "{total} open request(s) you may answer:",
        "pending.agent": "agent {agent}",
        "pending.due": ", due {when}",
        "pending.showing": "Showing {first}–{last} of {total} (page {page} of {pages})",
        "pending.next_slack": " — `/askhuman pending {next}` for the next page",
        "pending.next_feishu": "Page {page} of {pages}: send /pending {next} for more.",
        "help.slack": "*askhuman* lets AI agents ask people for approvals.\n"
                      "• `/askhuman run <agent> <prompt>` — start a run; its final answer "
                      "appears here, in a thread.\n"
                      "• `@askhuman <agent>: <prompt>` — the same, by mentioning me in a "
                      "channel I'm in.\n"
                      "• `/askhuman pending [page]` — the open requests you may answer; "
                      "tick several to approve or reject them at once.\n"
                      "• `/askhuman grants` — the standing grants you may revoke.\n"
                      "• `/askhuman help` — this message.",
        "help.no_agents": "You may not start any agent yet; an admin can add you to an "
                          "agent's `starters`.",
        "help.agents": "*Agents you may start:* {names}",
        "help.unknown": "I don't know `{sub}`.",
        "withdraw": "Withdraw",
        "withdraw_title": "Withdraw this request?",
        "withdraw_confirm": "The agent is told the request was cancelled. Only the person "
                            "who started the run, or an admin, may withdraw it.",
        "home.title": "Waiting for you",
        "home.updated": "Updated {when}",
        "home.nothing": "Nothing is waiting for you.",
        "home.more": "{more} more not shown here: use /askhuman pending to see them all.",
        "home.files_on_card": "Attach files on the card itself.",
        "home.runs": "Runs you started",
        "home.no_runs": "You have not started any runs yet.",
        "home.waiting_on": "waiting on: {what}",
        "run_status.running": "running",
        "run_status.waiting": "waiting for an answer",
        "run_status.succeeded": "finished",
        "run_status.failed": "failed",
        "click.received": "Received — recording your answer. The card will show the outcome.",
        "feishu.help": "To start a run, write `<agent>: <what to do>`, for example "
                       "`deploy: ship v1.2.3`. Away? `delegate @someone until 2026-12-24`. "
                       "`grants` lists the standing grants you may revoke.",
        "feishu.help_none": "You may not start any agent yet; an admin can add you to an "
                            "agent's starters.",
        "feishu.help_agents": "Agents you may start: {agents}.",
        "click.about": "About your answer on an askhuman card: {text}",
    },
    "zh-CN": {
        "status.pending": "等待回复",
        "status.submitted": "已回复",
        "status.timeout": "已超时",
        "status.cancelled": "已取消",
        "status.unavailable": "无法处理",
        "yes": "是",
        "links_to": "链接到 {host}",
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
        "progress": "已批准 {votes}/{quorum}：{who}",
        "choice": "{who}（{choice}）",
        "signoffs": "会签：{groups}",
        "signed": "{group} \u2713",
        "unsigned": "{group}（待签）",
        "reason_label": "原因",
        "reason_placeholder": "原因（部分操作必填；会提供给智能体并记入审计）",
        "decided.timeout": "已超时：未作决定",
        "escalated_to": "已升级至 {routes}",
        "reminded_at": "上次提醒 {when}",
        "tool.title": "审批工具调用：{tool}",
        "tool.question": "智能体 {agent} 想用下面的参数运行 {tool}。批准只会执行这一次调用；"
                         "拒绝则停止它（如填写原因，会转告智能体）。",
        "tool.reason": "原因（可选）",
        "tool.reason_hint": "原因，供智能体和审计参考",
        "tool.approve": "批准",
        "tool.reject": "拒绝",
        "tool.wants_to_run": "{agent} 想运行 {tool}",
        "tool.arguments": "参数：",
        "tool.fixed": "（管理员固定）",
        "tool.more_chars": "（另有 {count} 个字符）",
        "tool.more_args": "另有 {count} 个参数未显示",
        "tool.grant": "批准并允许类似调用…",
        "tool.grant_question": "“批准并允许类似调用…”还会在下面选定的时长和次数内，"
                               "自动批准 {agent} 之后{similar}的 {tool} 调用，不再询问。",
        "tool.grant_exact": "参数完全相同",
        "tool.grant_scope": "满足 {scope}",
        "tool.grant_duration": "允许类似调用的时长",
        "tool.grant_uses": "允许的次数",
        "tool.approve_edit": "修改后批准",
        "tool.edited": "{changes}，由 {who} 修改",
        "edit.title": "修改后批准",
        "edit.submit": "批准",
        "edit.intro": "修改下面的参数，然后批准修改后的 {tool} 调用。",
        "edit.json_hint": "JSON 值",
        "hint.options": "选项",
        "hint.any": "可多选",
        "hint.min": "最小 {value}",
        "hint.max": "最大 {value}",
        "hint.number": "数字",
        "hint.file": "上传文件",
        "hint.up_to": "（最多 {count} 个）",
        "hint.checkbox": "是 / 否",
        "hint.date": "日期（YYYY-MM-DD）",
        "hint.text": "文本",
        "feishu.file_reply": "请在此卡片的话题中回复文件。",
        "default": "[默认：{value}]",
        "call_hash_colon": "调用哈希：{hash}",
        "style.primary": " [主要]",
        "style.destructive": " [危险操作]",
        "pending.none": "没有等待你处理的请求。",
        "pending.count": "你可以处理的请求共 {total} 个：",
        "pending.agent": "智能体 {agent}",
        "pending.due": "，截止 {when}",
        "pending.showing": "第 {first}–{last} 个，共 {total} 个（第 {page}/{pages} 页）",
        "pending.next_slack": " — 发送 `/askhuman pending {next}` 查看下一页",
        "pending.next_feishu": "第 {page}/{pages} 页：发送 /pending {next} 查看更多。",
        "help.slack": "*askhuman* 让 AI 智能体请人审批。\n"
                      "• `/askhuman run <agent> <prompt>` — 发起运行；"
                      "最终结果会在此处的话题中回复。\n"
                      "• `@askhuman <agent>: <prompt>` — 同上，在我所在的频道中提及我。\n"
                      "• `/askhuman pending [page]` — 列出你可以处理的请求，"
                      "可勾选多个一次批准或拒绝。\n"
                      "• `/askhuman grants` — 列出你可以撤销的长期授权。\n"
                      "• `/askhuman help` — 显示此帮助。",
        "help.no_agents": "你还不能发起任何智能体；管理员可以把你加入智能体的 `starters`。",
        "help.agents": "*你可以发起的智能体：* {names}",
        "help.unknown": "我不认识 `{sub}`。",
        "withdraw": "撤回",
        "withdraw_title": "撤回此请求？",
        "withdraw_confirm": "智能体将收到请求已取消的结果。只有发起运行的人或管理员可以撤回。",
        "home.title": "等待你处理",
        "home.updated": "更新于 {when}",
        "home.nothing": "没有等待你处理的请求。",
        "home.more": "另有 {more} 个未在此显示：发送 /askhuman pending 查看全部。",
        "home.files_on_card": "请在卡片上上传文件。",
        "home.runs": "你发起的运行",
        "home.no_runs": "你还没有发起过运行。",
        "home.waiting_on": "等待：{what}",
        "run_status.running": "运行中",
        "run_status.waiting": "等待回复",
        "run_status.succeeded": "已完成",
        "run_status.failed": "失败",
        "click.received": "已收到，正在记录你的回复。卡片会显示结果。",
        "feishu.help": "要发起运行，请发送 `<智能体>: <要做的事>`，例如 `deploy: ship v1.2.3`。"
                       "不在？发送 `delegate @某人 until 2026-12-24`。"
                       "发送 `grants` 查看你可以撤销的长期授权。",
        "feishu.help_none": "你还不能发起任何智能体；"
                            "请管理员把你加入某个智能体的发起人（starters）。",
        "feishu.help_agents": "你可以发起的智能体：{agents}。",
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


def t_or(key: str, fallback: str, **values: Any) -> str:
    """Like ``t``, but ``fallback`` for a key the catalog lacks (e.g. a run state that
    is new to this version)."""
    return t(key, **values) if key in CATALOG[DEFAULT_LOCALE] else fallback
def say(locale: str | None, key: str, **values: Any) -> str:
    """``t(key)`` in ``locale`` (for texts outside a card: toasts, direct messages)."""
    with speaking(locale):
        return t(key, **values)


def status_word(status: str) -> str:
    return t(f"status.{status}")


def decision_word(status: str) -> str:
    """The head of a closed card's decision line: a timeout says no decision was made."""
    return t("decided.timeout") if status == "timeout" else status_word(status)


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
