"""A small labelled recall fixture: remembered exchanges, and queries with the ones that should
come back (chatter-only queries should bring back nothing).

Labels are by key and graded: a query's `want` lists the memories that answer it, `ok` the related
ones a careful person would not mind seeing. A hit in neither is a false positive; a wanted memory
left out is a false negative.
"""

from __future__ import annotations

# key -> (what the person said, what the assistant answered)
MEMORIES: dict[str, tuple[str, str]] = {
    "badge": ("My badge number is 7731, I sit on floor 4.", "Noted: badge 7731, floor 4."),
    "dentist": ("I have a dentist appointment Thursday at 3pm.", "I'll keep Thursday 3pm in mind."),
    "tea": ("I drink green tea, never coffee.", "Green tea it is."),
    "falcon_deadline": (
        "Project Falcon ships on March 14, the deadline is firm.",
        "Falcon: March 14, firm.",
    ),
    "falcon_owner": ("Priya owns the Falcon billing module.", "Priya owns Falcon billing."),
    "vpn": ("The VPN endpoint moved to vpn2.example.net last week.", "VPN: vpn2.example.net."),
    "postgres": (
        "The payments service runs on Postgres 15 with a read replica.",
        "Payments: Postgres 15, one replica.",
    ),
    "oncall": ("Kenji is on call for the payments service this week.", "Kenji is on call."),
    "offsite": ("The team offsite is in Lisbon from May 6 to May 8.", "Lisbon, May 6-8."),
    "flight": ("My flight to Lisbon lands at 10:40 on May 5.", "Landing 10:40, May 5."),
    "allergy": ("I am allergic to peanuts, tell the caterer.", "Peanut allergy noted."),
    "laptop": ("My laptop is a ThinkPad X1 running Fedora 40.", "ThinkPad X1, Fedora 40."),
    "standup": ("Standup moved to 9:15 starting next Monday.", "Standup at 9:15 from Monday."),
    "budget": ("The Q3 marketing budget is capped at 42k euros.", "Q3 marketing: 42k cap."),
    "grafana": (
        "The Grafana dashboard for checkout latency is called checkout-p99.",
        "Dashboard: checkout-p99.",
    ),
    "birthday": ("Marta's birthday is on June 2, we should get a cake.", "Cake for Marta, June 2."),
    "kafka": ("Kafka retention on the orders topic is seven days.", "Orders topic: 7 days."),
    "invoice": ("Invoice 2024-118 from Acme is still unpaid.", "Acme invoice 2024-118 unpaid."),
    "parking": ("I park in spot B12 in the garage.", "Spot B12."),
    "spanish": ("I am learning Spanish, lessons on Wednesdays.", "Spanish on Wednesdays."),
    "release_train": (
        "The release train leaves every second Thursday.",
        "Release train: every second Thursday.",
    ),
    "wifi": ("The guest wifi password rotates every Monday.", "Guest wifi rotates Mondays."),
    "chatter_1": ("Thanks, that helps a lot!", "Glad it helped."),
    "chatter_2": ("Good morning everyone, how is it going today?", "Good morning! All well here."),
}

# (query, keys that answer it, keys that are related and acceptable)
QUERIES: list[tuple[str, frozenset[str], frozenset[str]]] = [
    ("what is my badge number?", frozenset({"badge"}), frozenset()),
    ("when is my dentist appointment", frozenset({"dentist"}), frozenset()),
    ("should I bring coffee or tea for her?", frozenset({"tea"}), frozenset()),
    ("when does project falcon ship?", frozenset({"falcon_deadline"}), frozenset({"falcon_owner"})),
    (
        "who owns the falcon billing module",
        frozenset({"falcon_owner"}),
        frozenset({"falcon_deadline"}),
    ),
    ("what's the vpn endpoint again", frozenset({"vpn"}), frozenset()),
    ("which postgres version does payments use", frozenset({"postgres"}), frozenset({"oncall"})),
    ("who is on call for payments", frozenset({"oncall"}), frozenset({"postgres"})),
    ("where is the offsite", frozenset({"offsite"}), frozenset({"flight"})),
    ("when does my flight land in lisbon", frozenset({"flight"}), frozenset({"offsite"})),
    ("any food allergies I should tell the caterer about?", frozenset({"allergy"}), frozenset()),
    ("what laptop do I have", frozenset({"laptop"}), frozenset()),
    ("what time is standup now", frozenset({"standup"}), frozenset()),
    ("how much is the q3 marketing budget", frozenset({"budget"}), frozenset()),
    ("name of the grafana checkout latency dashboard", frozenset({"grafana"}), frozenset()),
    ("when is marta's birthday", frozenset({"birthday"}), frozenset()),
    ("kafka retention for the orders topic", frozenset({"kafka"}), frozenset()),
    ("is the acme invoice paid yet", frozenset({"invoice"}), frozenset()),
    ("which parking spot is mine", frozenset({"parking"}), frozenset()),
    ("how often does the release train leave", frozenset({"release_train"}), frozenset()),
]

CHATTER: list[str] = [
    "thanks!",
    "ok sounds good",
    "hi, how are you doing today?",
    "good morning team",
    "can you help me with something quick?",
    "lol yes",
    "great, thank you so much",
    "hey, are you there?",
]
