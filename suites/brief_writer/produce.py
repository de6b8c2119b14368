"""The demo brief writer: a command producer (the request as JSON on stdin, the brief on stdout)."""

import json
import sys


def main() -> None:
    request = json.load(sys.stdin)
    account = request["inputs"]["account"]
    buyer = account["buyer"]
    trigger = account["trigger"]
    print(f"""# {account['name']}: account brief

## Why now
{account['name']} had a {trigger['type'].replace('_', ' ')} on {trigger['date']} (source: {trigger['source']}).
Teams that go through this usually revisit how they pay contractors abroad within a quarter, which is
where {account['bu']} fits.

## Buyer
{buyer['name']}, {buyer['title']} ({buyer['linkedin']}).

## Suggested first message
Hi {buyer['name'].split()[0]}, congratulations on the {trigger['type'].replace('_', ' ')} announced on
{trigger['date']}. When your team starts paying the new LATAM contractors, would a 20-minute look at how
{account['bu']} handles payroll in local currency be useful?
""")


if __name__ == "__main__":
    main()
