"""The sentences askhuman tells one person, in Simplified Chinese (``zh-CN``), by key.

The same keys and placeholders as ``catalog_en`` (a test checks both); the values put
in the placeholders (labels, names, agent names) stay as they were written.
"""

from __future__ import annotations

SENTENCES: dict[str, str] = {
    "verbatim": "{text}",
    "someone": "某人",
    "list.semicolon": "{a}；{b}",
    "list.lines": "{a}\n{b}",
    # -- platforms, by id
    "platform.slack": "Slack",
    "platform.feishu": "飞书",
    "platform.console": "控制台",
    "platform.api": "API 客户端",
    # -- who may answer
    "refused.not_allowed": "你无权回复此请求。",
    "refused.self_approval": "这个运行是你发起的，你不能自己批准。",
    "refused.unverified": "暂时无法核实你的成员身份，请一分钟后再试。",
    "refused.external": "你与此 Slack 工作区不属于同一组织，因此频道或群组成员身份在这里对你"
                        "不算数。管理员可以在路由的 slack 部分设置 allow_external: true 来允许。",
    "refused.route_gone": "此请求的路由已不在配置中，请联系管理员。",
    "refused.cancel": "你无权取消此请求。",
    "refused.withdraw": "只有发起此运行的人或 askhuman 管理员可以撤回此请求。",
    "refused.own_run": "这是你发起的运行，不能代他人回复。",
    "refused.delegation_revoked": "{who} 对你的委托已被撤销，你不能再代其回复。",
    "refused.delegation_ended": "{who} 对你的委托已于 {when} 结束，你不能再代其回复。",
    "refused.unreadable": "无法读取你的回复：{reason}",
    "refused.reason_needed": "{label} 需要填写原因：请在 {field} 中填写，然后再次选择 {again}。"
                             "尚未记录任何内容。",
    "refused.unknown_card": "此卡片（暂时）不可用，请稍后再试。",
    "refused.wrong_card": "此卡片与其请求不匹配。",
    "refused.approvals_local": "审批只能由审批人回复。",
    "request.not_found": "此请求不存在（链接可能有误或已过期）。",
    "request.no_such": "没有这个请求",
    # -- a request already closed
    "decided.by_choice_at": "已由 {by} 处理（{choice}），时间 {when}。",
    "decided.by_at": "已由 {by} 处理，时间 {when}。",
    "decided.by_choice": "已由 {by} 处理（{choice}）。",
    "decided.by": "已由 {by} 处理。",
    "closed.timed_out_already_at": "此请求已于 {when} 超时。",
    "closed.timed_out_already": "此请求已超时。",
    "closed.cancelled_by_at": "此请求已被 {by} 取消，时间 {when}。",
    "closed.cancelled_by": "此请求已被 {by} 取消。",
    "closed.unreachable_at": "此请求已关闭：{when} 时无法联系到任何人。",
    "closed.unreachable": "此请求已关闭：无法联系到任何人。",
    "closed.timed_out_at": "此请求已于 {when} 超时。",
    "closed.already": "此请求已关闭。",
    # -- answers and votes
    "answer.recorded": "谢谢，你的回复（{label}）已记录。",
    "vote.duplicate": "你的回复（{action}）已记录，正在等待其他审批人。",
    "vote.duplicate_elsewhere": "你已在 {platform} 上回复（{action}），正在等待其他审批人。",
    "vote.progress": "已记录，已批准 {votes}/{needed}：{who}。",
    "vote.progress_signoff": "已记录，已批准 {votes}/{needed}：{who}。仍需会签：{groups}。",
    "cancel.done": "已由 {who} 取消。",
    "cancel.done_reason": "已由 {who} 取消：{reason}",
    "withdraw.done": "已由 {who} 撤回。",
    "withdraw.done_reason": "已由 {who} 撤回：{reason}",
    # -- the click inbox
    "click.not_recorded": "暂时无法记录你的回复（数据库繁忙），没有任何更改。请再点一次。",
    "click.deferred": "已收到你的回复，但 askhuman 还未处理完成；它会重试并告诉你结果。",
    "click.gave_up": "askhuman 收到了你的回复，但多次尝试仍无法处理，没有任何更改。请再点一次。",
    "click.too_large": "你的回复太大，无法记录（{size} KB，上限为 {limit} KB）。",
    # -- values
    "value.required": "{label} 为必填项",
    "value.must_check": "必须勾选 {label}",
    "value.number": "{label} 必须是数字",
    "value.at_least": "{label} 不能小于 {value}",
    "value.at_most": "{label} 不能大于 {value}",
    "value.one_of": "{label} 只能是以下之一：{values}",
    "value.only_contain": "{label} 只能包含：{values}",
    "value.text": "{label} 必须是文本",
    "value.too_long": "{label} 太长：最多 {most} 个字符",
    "value.too_deep": "{label} 嵌套过深，不是有效的回复",
    "value.too_large": "{label} 太大，不是有效的回复",
    "value.too_many_choices": "{label} 最多只能选择 {most} 项",
    "value.checkbox": "{label} 只能是勾选或不勾选（true 或 false）",
    "value.date": "{label} 必须是 YYYY-MM-DD 格式的日期，例如 2025-01-31",
    "value.file_list": "{label} 必须是已上传文件的列表",
    "value.file_ref": "{label} 包含机器人不接受的文件引用",
    "value.file_invalid": "{label} 包含一个 {key} 无效的文件",
    "value.file_size": "{label} 包含一个大小无效的文件",
    "value.too_many_files": "{label} 最多只能上传 {most} 个文件",
    "value.no_action": "此请求没有操作 {action}；请选择 {offered}",
    "value.no_field": "此请求没有字段 {field}",
    "value.no_file_field": "此请求没有文件字段 {field}",
    "value.unreadable_files": "无法读取 {label} 的文件",
    "files.attached_to": "已向 {label} 附加 {count} 个文件",
    "files.attached": "{items}；提交表单即可发送。",
    # -- delegation
    "delegation.usage": "用法：`delegate @某人 until 2026-12-24`（移交你的审批）、"
                        "`delegate revoke [@某人]` 或 `delegate list`。",
    "delegation.until_hint": "请写日期，例如 2026-12-24（委托在当天开始时结束，UTC），"
                             "或 ISO 时间，例如 2026-12-24T09:00+08:00",
    "delegation.not_a_date": "'{value}' 不是日期；{hint}",
    "delegation.not_future": "{value} 不是将来的时间，请给出更晚的日期",
    "delegation.other_platform": "请委托给同一平台上的人（Slack 和飞书的用户 ID 不同）",
    "delegation.to_self": "你不能委托给自己，请指定其他人",
    "delegation.end_past": "结束时间不在将来，请给出更晚的日期",
    "delegation.not_delegated": "未委托：{reason}。",
    "delegation.added": "在 {until} 之前，{name} 可以回复你可以回复的请求（其本人发起的运行除外）。"
                        "发送 `delegate revoke` 可撤销。",
    "delegation.none_to_revoke": "你没有可撤销的有效委托。",
    "delegation.revoked": "已撤销 {count} 个委托；现在只有你本人回复你的请求。",
    "delegation.none": "没有有效的委托。发送 `delegate @某人 until 2026-12-24` 可移交你的审批。",
    "delegation.to": "你 → {name}，至 {until}",
    "delegation.from": "{name} → 你，至 {until}",
    "delegation.earlier": "更早",
    "delegation.who_unknown": "我无法确定 {who} 是谁。{usage}",
    "delegation.who_unknown_slack": "我无法确定 {who} 是谁；请从列表中选择并提及此人，"
                                    "或给出其成员 ID（U…，见其个人资料）或邮箱。",
    "delegation.who_unknown_feishu": "我无法确定 {who} 是谁；请 @ 此人，或给出其 open_id"
                                     "（ou_…）或邮箱。",
    # -- starting agents
    "start.refused": "你无权发起 '{agent}'。管理员可以在 {key} 下添加你。",
    "start.retired": "智能体 '{agent}' 已从配置中移除：不再接受新的运行"
                     "（其未完成的请求仍会完成）。",
    "start.retired_agents": "智能体 '{agent}' 已从配置中移除：不再接受新的运行（其未完成的请求"
                            "仍会完成）。你可以发起的智能体：{agents}。",
    "start.unknown_none": "未知的智能体 '{agent}'，而且你还不能发起任何智能体；"
                          "请管理员把你加入某个智能体的发起人（starters）。",
    "start.unknown": "未知的智能体 '{agent}'。你可以发起的智能体：{agents}。",
    "start.not_recorded": "暂时无法记录你对 '{agent}' 的运行请求（数据库繁忙），"
                          "没有启动任何运行。请重试。",
    "start.not_started": "你对 '{agent}' 的运行无法启动：{reason}",
    "start.gave_up": "askhuman 收到了你对 '{agent}' 的运行请求，但多次尝试后仍无法启动，"
                     "没有运行任何内容。请重试。",
    "start.no_thread": "无法在这里发布运行的第一条消息（{reason}），运行没有地方汇报，"
                       "因此没有运行。",
    # -- the database and the platform listeners
    "db.down": "暂时无法连接数据库，请稍后再试。",
    "pending.failed": "暂时无法列出你的请求，请稍后再试。",
    "pending.failed_logs": "列出你的请求失败，请查看机器人日志。",
    "run.failed_logs": "无法启动运行，请查看机器人日志。",
    "button.unknown": "无法识别这个按钮，消息可能已过期。",
    "button.invalid": "这个按钮无效。",
    "upload.not_opened": "未能及时打开上传表单，请再点一次。",
    "files.not_asked": "此请求不需要上传文件。",
    "click.failed": "出了点问题，请重试。",
    "click.too_old": "这次点击已过期，请重试。",
    # -- batch decisions from a pending list (``bot.engine.batch``, ``renderers.batch``)
    "batch.approved": "已批准 {count} 个。",
    "batch.rejected": "已拒绝 {count} 个。",
    "batch.voted": "你的投票已计入 {count} 个，仍在等待其他审批人：{items}。",
    "batch.deferred": "{count} 个已收到，仍在处理中（处理完会告诉你结果）：{items}。",
    "batch.not_recorded": "未记录：{items}。",
    "batch.too_many": "另有 {count} 个未处理（每次最多 {most} 个）。",
    "batch.item": "\u201c{title}\u201d（{why}）",
    "batch.item_bare": "\u201c{title}\u201d",
    "batch.and": "{a}、{b}",
    "batch.then": "{a}{b}",
    "batch.why_reason": "需要填写理由",
    "batch.needs_card": "此请求不能在列表中批量处理，请在它的卡片上回复。",
    "batch.none_selected": "请先勾选至少一个请求，再点一次。",
    "batch.received": "已收到 {count} 个，正在处理。此列表会显示每个的结果。",
    "batch.heading": "批量处理",
    "batch.route": "路由 {route}",
    "batch.on_card": "{title}（请在它的卡片上回复）",
    "batch.approve_selected": "批准所选",
    "batch.reject_selected": "拒绝所选",
    "batch.reason": "理由（可选，适用于所有所选请求）",
    "batch.reason_hint": "为什么？",
    "batch.confirm": "确定拒绝所有所选请求吗？",
}
