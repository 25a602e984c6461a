"""Links can't lie: a link whose text names one host never opens another, on Slack
mrkdwn, Feishu Markdown and plain text (docs/security.md, "Links can't lie")."""

from __future__ import annotations

import html
import re
from collections.abc import Callable

import pytest

from bot.askhuman.schema import AskHumanToolArgs
from renderers import feishu, slack, text
from renderers.card import RequestCard
from renderers.links import links_in, misleading_host, target_host, text_hosts
from tests.renderers.helpers import (
    assert_valid_feishu,
    assert_valid_slack,
    feishu_texts,
    slack_texts,
    walk,
)

HOMOGLYPH = "p\u0430ypal.com"  # Cyrillic "а": looks like paypal.com, is xn--pypal-4ve.com

# (Markdown, the host the reader must be told, words that must stay visible)
LIES = [
    ("[https://good.example.com/notes](https://evil.example.net/phish)",
     "evil.example.net", "https://good.example.com/notes"),
    ("[paypal.com](https://xn--pypal-4ve.com/login)", "xn--pypal-4ve.com", "paypal.com"),
    (f"[paypal.com](https://{HOMOGLYPH}/login)", "xn--pypal-4ve.com", "paypal.com"),
    (f"[https://{HOMOGLYPH}](https://paypal.com.evil.net/)", "paypal.com.evil.net",
     HOMOGLYPH),
    ("[good.example.com](https://good.example.com.evil.net/)", "good.example.com.evil.net",
     "good.example.com"),
    ("[good.example.com](https://good.example.com@evil.net/notes)", "evil.net",
     "good.example.com"),
    ("[https://good.example.com@evil.net](https://evil.net/)", "evil.net",
     "https://good.example.com@evil.net"),
    ("[www.paypal.com](https://paypal.com/)", "paypal.com", "www.paypal.com"),
    ("[good.example.com/notes](https://evil.example.net/notes)", "evil.example.net",
     "good.example.com/notes"),
    ("[HTTPS://Good.Example.com](https://evil.example.net/)", "evil.example.net",
     "HTTPS://Good.Example.com"),
    ("[Sign in at paypal.com now](https://evil.example.net/)", "evil.example.net",
     "Sign in at paypal.com now"),
    ("[help@good.example.com](mailto:help@evil.example.net)", "evil.example.net",
     "help@good.example.com"),
]

HONEST = [
    "[the notes](https://evil.example.net/phish)",
    "<https://good.example.com/notes>",
    "[good.example.com](https://GOOD.Example.COM./notes)",
    "[HTTPS://Good.Example.com.](https://good.example.com/)",
    "[b\u00fccher.example](https://xn--bcher-kva.example/)",
    "[xn--bcher-kva.example](https://b\u00fccher.example/)",
    "[v2.14.0 release notes](https://evil.example.net/)",
    "[help@good.example.com](mailto:help@good.example.com)",
]


def _card(markdown: str, locale: str = "en") -> RequestCard:
    args = AskHumanToolArgs.model_validate({
        "question": "Approve?", "markdown": markdown,
        "actions": [{"id": "ok", "label": "Approve", "style": "primary"}]})
    return RequestCard(ref="r1", args=args, agent_name="ops", locale=locale)


_SLACK_LINK = re.compile(r"<([^|>]+)\|([^>]*)>")


def slack_links(markdown: str, locale: str = "en") -> tuple[str, list[tuple[str, str]]]:
    """What Slack shows (entities decoded) and every ``(text, target)`` it would link."""
    payload = slack.render_request(_card(markdown, locale))
    assert_valid_slack(payload)
    mrkdwn = [d["text"] for d in walk(payload) if d.get("type") == "mrkdwn"]
    links = [(html.unescape(t), html.unescape(u)) for m in mrkdwn
             for u, t in _SLACK_LINK.findall(m)]
    return html.unescape("\n".join(slack_texts(payload))), links


def feishu_links(markdown: str, locale: str = "en") -> tuple[str, list[tuple[str, str]]]:
    """What Feishu shows and every link its Markdown parses into (CommonMark re-parse)."""
    card = feishu.render_card(_card(markdown, locale))
    assert_valid_feishu(card)
    contents = [d["content"] for d in walk(card) if d.get("tag") == "markdown"]
    links = [link for c in contents for link in links_in(c)]
    return html.unescape("\n".join(feishu_texts(card))), links


def text_links(markdown: str, locale: str = "en") -> tuple[str, list[tuple[str, str]]]:
    """The plain text, and the links it would become if rendered as Markdown."""
    out = text.render_text(_card(markdown, locale))
    return out, links_in(out)


PLATFORMS: dict[str, Callable[..., tuple[str, list[tuple[str, str]]]]] = {
    "slack": slack_links, "feishu": feishu_links, "text": text_links}


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize(("markdown", "real", "words"), LIES)
def test_a_link_whose_text_names_another_host_becomes_text_and_its_real_host(
    platform: str, markdown: str, real: str, words: str
) -> None:
    shown, links = PLATFORMS[platform](markdown)
    assert f"{words} (links to {real})" in shown.replace("\u2060", "")
    assert links == [], links  # nothing in the output can be parsed back into a link


@pytest.mark.parametrize("platform", PLATFORMS)
@pytest.mark.parametrize("markdown", HONEST)
def test_honest_links_stay_links(platform: str, markdown: str) -> None:
    shown, links = PLATFORMS[platform](markdown)
    assert "links to" not in shown
    assert len(links) == 1
    assert misleading_host(*links[0]) is None


@pytest.mark.parametrize("platform", PLATFORMS)
def test_the_note_is_in_the_cards_language(platform: str) -> None:
    shown, links = PLATFORMS[platform](LIES[0][0], "zh-CN")
    assert "https://good.example.com/notes (链接到 evil.example.net)" in shown
    assert links == []


@pytest.mark.parametrize("platform", PLATFORMS)
def test_a_lie_next_to_an_honest_link_leaves_the_honest_one_alone(platform: str) -> None:
    shown, links = PLATFORMS[platform](
        "[Release notes](https://example.com/r) · "
        "[https://example.com/r](https://evil.example.net/r)")
    assert "(links to evil.example.net)" in shown
    assert [target_host(href) for _text, href in links] == ["example.com"]


def test_plain_text_breaks_every_link_when_a_lie_cannot_be_rewritten_in_place() -> None:
    """A reference-style link is resolved far from its text; the plain-text renderer
    then breaks all link syntax rather than leave it."""
    markdown = "[https://good.example.com][1] and [docs][2]\n\n[1]: https://evil.net/\n" \
               "[2]: https://example.com/docs"
    out, links = text_links(markdown)
    assert links == []
    assert "https://good.example.com" in out and "evil.net" in out


@pytest.mark.parametrize("platform", ["slack", "feishu"])
def test_a_reference_link_that_lies_is_caught_on_cards_too(platform: str) -> None:
    shown, links = PLATFORMS[platform](
        "[https://good.example.com][1]\n\n[1]: https://evil.net/")
    assert "https://good.example.com (links to evil.net)" in shown
    assert links == []


@pytest.mark.parametrize(("words", "hosts"), [
    ("the notes", []),
    ("e.g. version 2.14.0, 4.2% of 10 users", []),
    ("note: javascript:alert(1)", []),
    ("HTTPS://Good.Example.com./x", ["good.example.com"]),
    ("(www.PayPal.com)", ["www.paypal.com"]),
    (HOMOGLYPH, ["xn--pypal-4ve.com"]),
    ("https://a.example@b.example", ["\x00user-info"]),
    ("ops@good.example.com", ["good.example.com"]),
    ("10.0.0.1:8080/admin", ["10.0.0.1"]),
])
def test_which_words_name_a_host(words: str, hosts: list[str]) -> None:
    assert text_hosts(words) == hosts


@pytest.mark.parametrize(("href", "host"), [
    ("https://good.example.com@evil.net/x", "evil.net"),
    ("https://EVIL.net./", "evil.net"),
    ("https://b\u00fccher.example/", "xn--bcher-kva.example"),
    ("mailto:ops@Example.com?subject=x", "example.com"),
])
def test_the_target_host_is_normalised(href: str, host: str) -> None:
    assert target_host(href) == host
