"""Timestamps as the records write them: ISO 8601 in UTC with a Z."""

from __future__ import annotations

import datetime as dt


def utc_now(timespec: str = "seconds") -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec=timespec).replace("+00:00", "Z")
