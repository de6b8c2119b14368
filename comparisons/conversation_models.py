"""The follow-up demo's model (followups.cases.yaml), on the mock provider: offline, deterministic, no key.

``mock/guide`` answers a conversation from the chat messages it is sent, as a chat model does: asked for a capital,
it names the city; asked a follow-up about "it", it finds the city in its own earlier reply (the history the harness
sends it) and names the river that runs through it. Sent the follow-up alone, it could not tell which city is meant.
Registered by the import at the end of comparisons/conftest.py.
"""

from __future__ import annotations

import re

from harness.llm.providers.mock import mock_model

CAPITALS = {"France": "Paris", "Germany": "Berlin", "the United Kingdom": "London", "Hungary": "Budapest",
            "Egypt": "Cairo"}
RIVERS = {"Paris": "Seine", "Berlin": "Spree", "London": "Thames", "Budapest": "Danube", "Cairo": "Nile"}


@mock_model("guide")
def guide(request):
    asked = request.messages[-1].text
    country = re.search(r"capital of (.+?)\?", asked)
    if country:
        return CAPITALS.get(country.group(1), "I do not know.")
    own_replies = [message.text for message in request.messages if message.role == "assistant"]
    city = next((city for reply in reversed(own_replies) for city in RIVERS if city in reply), None)
    return f"The {RIVERS[city]}." if city else "Which city do you mean?"
