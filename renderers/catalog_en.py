"""The sentences askhuman tells one person, in English, by key (``renderers.words``).

Refusals, toasts, "already decided", validation errors, click-inbox notes, delegation
and starter messages. ``{name}`` placeholders are filled with model- or admin-written
values (labels, names) that are never translated, or with other keys' words.
``catalog_zh`` has every key here, with the same placeholders.
"""

from __future__ import annotations

SENTENCES: dict[str, str] = {
    "verbatim": "{text}",
    "someone": "someone",
    "list.semicolon": "{a}; {b}",
    "list.lines": "{a}\n{b}",
    # -- platforms, by id (``words.PLATFORM_KEYS``)
    "platform.slack": "Slack",
    "platform.feishu": "Feishu",
    "platform.console": "the console",
    "platform.api": "an API client",
    # -- who may answer (``bot.engine.authz``, ``access``, ``decisions``, ``withdraw``)
    "refused.not_allowed": "You are not allowed to answer this request.",
    "refused.self_approval": "You started this run, so you cannot approve it yourself.",
    "refused.unverified": "I can't verify your membership right now; please try again in a "
                          "minute.",
    "refused.external": "You belong to another organisation than this Slack workspace, so "
                        "channel or group membership does not count for you here. An admin "
                        "can allow it with allow_external: true on the route's slack section.",
    "refused.route_gone": "This request's route is no longer configured; ask an admin.",
    "refused.cancel": "You are not allowed to cancel this request.",
    "refused.withdraw": "Only the person who started this run, or an askhuman admin, may "
                        "withdraw this request.",
    "refused.own_run": "You started this run, so you cannot answer it for someone else.",
    "refused.delegation_revoked": "Your delegation from {who} was revoked, so you can no "
                                  "longer answer for them.",
    "refused.delegation_ended": "Your delegation from {who} ended at {when}, so you can no "
                                "longer answer for them.",
    "refused.unreadable": "Your answer could not be read: {reason}",
    "refused.reason_needed": "{label} needs a reason: write it in the {field} field, then "
                             "choose {again} again. Nothing was recorded yet.",
    "refused.unknown_card": "This card is not active (yet); please try again in a moment.",
    "refused.wrong_card": "This card does not match its request.",
    "refused.approvals_local": "Approvals can only be answered by approvers.",
    "request.not_found": "This request does not exist (the link may be wrong or outdated).",
    "request.no_such": "no such request",
    # -- a request already closed (``bot.engine.cards.already_decided_message``)
    "decided.by_choice_at": "Already decided by {by} ({choice}) at {when}.",
    "decided.by_at": "Already decided by {by} at {when}.",
    "decided.by_choice": "Already decided by {by} ({choice}).",
    "decided.by": "Already decided by {by}.",
    "closed.timed_out_already_at": "This request already timed out at {when}.",
    "closed.timed_out_already": "This request already timed out.",
    "closed.cancelled_by_at": "This request was already cancelled by {by} at {when}.",
    "closed.cancelled_by": "This request was already cancelled by {by}.",
    "closed.unreachable_at": "This request is closed: nobody could be reached at {when}.",
    "closed.unreachable": "This request is closed: nobody could be reached.",
    "closed.timed_out_at": "This request timed out at {when}.",
    "closed.already": "This request is already closed.",
    # -- answers and votes (``bot.engine.decisions``)
    "answer.recorded": "Thanks, your answer ({label}) was recorded.",
    "vote.duplicate": "Your answer ({action}) is already recorded; waiting for the other "
                      "approvers.",
    "vote.duplicate_elsewhere": "You already answered ({action}) on {platform}; waiting for "
                                "the other approvers.",
    "vote.progress": "Recorded, {votes} of {needed} approvals: {who}.",
    "vote.progress_signoff": "Recorded, {votes} of {needed} approvals: {who}. Still needs "
                             "sign-off from: {groups}.",
    "cancel.done": "Cancelled by {who}.",
    "cancel.done_reason": "Cancelled by {who}: {reason}",
    "withdraw.done": "Withdrawn by {who}.",
    "withdraw.done_reason": "Withdrawn by {who}: {reason}",
    # -- the click inbox (``bot.engine.clicks``, ``inbox``)
    "click.not_recorded": "I couldn't record your answer just now (the database is busy); "
                          "nothing was changed. Please click again.",
    "click.deferred": "Your answer was received, but askhuman couldn't finish processing it "
                      "yet; it will retry and tell you the outcome.",
    "click.gave_up": "askhuman received your answer but couldn't process it after several "
                     "tries; nothing was changed. Please click again.",
    "click.too_large": "Your answer is too large to record ({size} KB; the limit is {limit} "
                       "KB).",
    # -- values (``bot.engine.values``, ``attachments``)
    "value.required": "{label} is required",
    "value.must_check": "{label} must be checked",
    "value.number": "{label} must be a number",
    "value.at_least": "{label} must be at least {value}",
    "value.at_most": "{label} must be at most {value}",
    "value.one_of": "{label} must be one of: {values}",
    "value.only_contain": "{label} may only contain: {values}",
    "value.text": "{label} must be text",
    "value.too_long": "{label} is too long: at most {most} characters",
    "value.too_deep": "{label} is nested too deeply to be an answer",
    "value.too_large": "{label} is too large to be an answer",
    "value.too_many_choices": "{label} accepts at most {most} choices",
    "value.checkbox": "{label} must be checked or unchecked (true or false)",
    "value.date": "{label} must be a date written as YYYY-MM-DD, e.g. 2025-01-31",
    "value.file_list": "{label} must be a list of uploaded files",
    "value.file_ref": "{label} contains a file reference the bot does not accept",
    "value.file_invalid": "{label} contains a file with an invalid {key}",
    "value.file_size": "{label} contains a file with an invalid size",
    "value.too_many_files": "{label} accepts at most {most} file(s)",
    "value.no_action": "This request has no action {action}; choose {offered}",
    "value.no_field": "This request has no field {field}",
    "value.no_file_field": "This request has no file field {field}",
    "value.unreadable_files": "Unreadable files for {label}",
    "files.attached_to": "Attached {count} file(s) to {label}",
    "files.attached": "{items}; submit the form to send them.",
    "edit.unreadable": "The edited arguments could not be read; nothing was recorded.",
    "edit.not_editable": "{label} cannot be edited on this request",
    "edit.json": "{label} must be a JSON value (e.g. [1, 2] or {{\"key\": \"value\"}})",
    "edit.min_length": "{label} is too short: at least {least} characters",
    "edit.type": "{label} must be of type {type}",
    "edit.invalid": "{label} is not valid: {reason}",
    "edit.changed_since": "The call was edited after you clicked; nothing was recorded. "
                          "Look at the edited call on the card and choose again.",
    "edit.not_sent": "You changed {names} but chose {label}, which runs the call as the "
                     "agent wrote it; nothing was recorded. Choose {edit} to run the changed "
                     "call, or undo the change.",
    # -- delegation (``bot.engine.delegation``, ``delegation_chat``, the chat commands)
    "delegation.usage": "Usage: `delegate @someone until 2026-12-24` (hand over your "
                        "approvals), `delegate revoke [@someone]`, or `delegate list`.",
    "delegation.until_hint": "write a date like 2026-12-24 (the delegation ends when that day "
                             "starts, UTC) or an ISO time like 2026-12-24T09:00+08:00",
    "delegation.not_a_date": "'{value}' is not a date; {hint}",
    "delegation.not_future": "{value} is not in the future; give a later date",
    "delegation.other_platform": "delegate to someone on the same platform (user ids differ "
                                 "between Slack and Feishu)",
    "delegation.to_self": "you cannot delegate to yourself; name someone else",
    "delegation.end_past": "the end date is not in the future; give a later date",
    "delegation.not_delegated": "Not delegated: {reason}.",
    "delegation.added": "Until {until}, {name} may answer the requests you may answer (not "
                        "runs they started). Revoke it with `delegate revoke`.",
    "delegation.none_to_revoke": "You have no active delegation to revoke.",
    "delegation.revoked": "Revoked {count} delegation(s); only you answer for yourself again.",
    "delegation.none": "No active delegations. Hand your approvals over with "
                       "`delegate @someone until 2026-12-24`.",
    "delegation.to": "You → {name} until {until}",
    "delegation.from": "{name} → you until {until}",
    "delegation.earlier": "earlier",
    "delegation.who_unknown": "I can't tell who {who} is. {usage}",
    "delegation.who_unknown_slack": "I can't tell who {who} is; name them with a mention "
                                    "picked from the list, their member ID (U…, in their "
                                    "profile) or their email.",
    "delegation.who_unknown_feishu": "I can't tell who {who} is; @-mention them, or give "
                                     "their open_id (ou_…) or email.",
    # -- starting agents (``bot.engine.authz``, ``starters``)
    "start.refused": "You are not allowed to start '{agent}'. An admin can add you under "
                     "{key}.",
    "start.retired": "Agent '{agent}' was removed from the configuration: it takes no new "
                     "runs (its open requests still finish).",
    "start.retired_agents": "Agent '{agent}' was removed from the configuration: it takes no "
                            "new runs (its open requests still finish). Agents you may "
                            "start: {agents}.",
    "start.unknown_none": "Unknown agent '{agent}', and you may not start any agent; ask an "
                          "admin to add you to an agent's starters.",
    "start.unknown": "Unknown agent '{agent}'. Agents you may start: {agents}.",
    # -- run starts stored before their ack (``bot.engine.run_starts``)
    "start.not_recorded": "I couldn't record your run of '{agent}' just now (the database is "
                          "busy); nothing was started. Please try again.",
    "start.not_started": "Your run of '{agent}' could not start: {reason}",
    "start.gave_up": "Your run of '{agent}' was received, but askhuman could not start it "
                     "after several attempts; nothing ran. Please try again.",
    "start.no_thread": "I could not post the run's first message here ({reason}), so the run "
                       "had nowhere to report; nothing ran.",
    # -- the database (``bot.engine.health``) and the platform listeners
    "db.down": "I can't reach my database right now; please try again shortly.",
    "pending.failed": "I couldn't list your requests just now; please try again shortly.",
    "pending.failed_logs": "Listing your open requests failed; see the bot's logs.",
    "run.failed_logs": "The run could not be started; see the bot's logs.",
    "button.unknown": "I don't recognise this button; the message may be outdated.",
    "button.invalid": "This button is not valid.",
    "upload.not_opened": "I couldn't open the upload form in time; please click again.",
    "files.not_asked": "This request does not ask for files.",
    "click.failed": "Something went wrong; please try again.",
    "click.too_old": "This click is too old; please try again.",
    # -- standing grants (``bot.engine.grants``, ``grant_use``)
    "grant.revoked": "Revoked standing grant {grant}; matching calls get a card again.",
    "grant.not_found": "There is no standing grant {grant}.",
    "grant.already_ended": "Standing grant {grant} was already revoked or has run out.",
    "grant.revoke_refused": "You may not revoke {grant}: {reason}",
    "grant.route_gone": "Route '{route}' is no longer configured; an operator can revoke "
                        "with askhuman grants revoke.",
    "grant.made": "Approved. Standing grant {grant} approves similar calls for {span}, "
                  "at most {uses} time(s); revoke it with /askhuman grants.",
    "grant.not_made_mixed": "Approved, without a standing grant: not every approver chose "
                            "to allow similar calls.",
    "grant.not_made_off": "Approved, without a standing grant: route '{route}' no longer "
                          "allows grants.",
    "grant.used": "Approved by standing grant {grant} from {who} ({left} of {total} uses "
                  "left, until {until}).",
    # -- standing grants listed in chat (``renderers.grants``, the grants listeners)
    "grants.title": "Standing grants you may revoke ({count}):",
    "grants.none": "No active standing grants on the routes you may answer.",
    "grants.allows": "{label}: {agent} may run {tool} with {scope}",
    "grants.scope_exact": "the exact same arguments",
    "grants.scope_cel": "arguments matching {cel}",
    "grants.args": "Granted for: {args}",
    "grants.by": "granted by {who}",
    "grants.uses_left": "{left} of {most} uses left",
    "grants.until": "until {when}",
    "grants.more": "{more} more not shown.",
    "grants.revoke": "Revoke",
    "grants.keep": "Keep it",
    "grants.revoke_title": "Revoke {label}?",
    "grants.revoke_confirm": "Calls it covers will ask for approval again, at once.",
    "grants.failed": "I couldn't list the standing grants just now; please try again shortly.",
    "grants.sent_direct": "I sent you the standing grants in our direct chat.",
    # -- batch decisions from a pending list (``bot.engine.batch``, ``renderers.batch``)
    "batch.approved": "Approved {count}.",
    "batch.rejected": "Rejected {count}.",
    "batch.voted": "Your vote was counted on {count}, still waiting for other approvers: "
                   "{items}.",
    "batch.deferred": "{count} received and still being processed (you will be told the "
                      "outcome): {items}.",
    "batch.not_recorded": "Not recorded: {items}.",
    "batch.too_many": "{count} more were not processed (at most {most} at a time).",
    "batch.item": "\u201c{title}\u201d ({why})",
    "batch.item_bare": "\u201c{title}\u201d",
    "batch.and": "{a}, {b}",
    "batch.then": "{a} {b}",
    "batch.why_reason": "needs a reason",
    "batch.needs_card": "This request can't be decided from a list; answer it on its card.",
    "batch.none_selected": "Select at least one request first, then click again.",
    "batch.received": "Received {count}; deciding them now. This list will show what became "
                      "of each.",
    "batch.heading": "Decide several at once",
    "batch.route": "Route {route}",
    "batch.on_card": "{title} (answer it on its card)",
    "batch.approve_selected": "Approve selected",
    "batch.reject_selected": "Reject selected",
    "batch.reason": "Reason (optional; applies to every selected request)",
    "batch.reason_hint": "Why?",
    "batch.confirm": "Reject every selected request?",
}
