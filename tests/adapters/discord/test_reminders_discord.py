"""Reminders on the fake Discord: /remind as a slash command, delivered once to the channel."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.app import build_pipeline
from tests.support import discord_e2e_settings, running_client, slash, wait_until


async def test_slash_remind_is_delivered_once_to_the_channel(fake_discord, openai, world, tmp_path):
    now = [datetime(2026, 12, 1, 12, 0, tzinfo=UTC)]
    settings = discord_e2e_settings(fake_discord, openai, world)
    channel = world.general
    async with (
        build_pipeline(settings, tmp_path, clock=lambda: now[0]) as pipeline,
        running_client(pipeline, settings),
    ):
        r = await slash(fake_discord, "remind", world.member, channel, text="in 5 minutes to stretch")
        assert r["content"].startswith("OK, reminder #1: Tuesday 1 December 2026 at 12:05 (UTC): stretch")
        now[0] += timedelta(minutes=5, seconds=1)

        def reminded() -> list[str]:
            return [t for t in fake_discord.shown(channel) if t.startswith("⏰")]

        await fake_discord.wait_for(reminded, timeout=20)

        async def settled() -> bool:
            return await pipeline.reminders.api.state() == {"open": 0, "done": 1}

        await wait_until(settled, timeout=15, what="the send recorded")
        [courier] = pipeline.reminders.couriers
        assert await courier.tick() == 0
    name = world.member.get("global_name") or world.member["username"]
    assert reminded() == [f"⏰ Reminder for {name}: stretch"]
