"""What the bot does unasked: reminders, follow-ups, catch-up digests.

- remind: /remind, /reminders, /unremind, /timezone, and "remind me ..." in words
- when: reminder times and recurrences in plain words; reminder_routes: their memory API calls
- delivery: `ReminderDesk`, due reminders delivered exactly once (the service's `reminders`)
- followups: the day-after check-ins; plans: a dated plan found in a message
- catchup: /catchup and "what did I miss?"

May import: `bot.chat`, `bot.config`, `bot.errors`, `memory_engine.api`,
`memory_engine.catchup` and `memory_engine.reminders.wire`; never an adapter.
"""
