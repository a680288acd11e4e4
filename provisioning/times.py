"""Lease times: parsed from the settings, sent to Blazar in UTC, shown in the site's and the user's zone.

Blazar takes ``%Y-%m-%d %H:%M`` in UTC (python-chi 1.2.10 ``BLAZAR_TIME_FORMAT``; its ``Lease``
formats the datetime it is given without converting it), so every time here is an aware UTC
datetime, rounded up to the minute. A start without an offset means the site's local time.
``utcnow`` and ``sleep`` are looked up at call time, so tests replace them with a fake clock.
"""

from __future__ import annotations

import re
import time
from datetime import datetime, timedelta, timezone, tzinfo

from provisioning import messages as msg
from provisioning.errors import ProvisioningError

# a site's wall clock (its time zone database name); an unknown site shows UTC
SITE_TIME_ZONES = {"CHI@TACC": "America/Chicago", "CHI@UC": "America/Chicago", "KVM@TACC": "America/Chicago"}
RELATIVE = re.compile(r"^\+\s*(\d+)\s*(m|min|h|d)$")
UNITS = {"m": "minutes", "min": "minutes", "h": "hours", "d": "days"}


def utcnow() -> datetime:
    """Now, as an aware UTC datetime."""
    return datetime.now(timezone.utc)


def sleep(seconds: float) -> None:
    time.sleep(seconds)


def site_zone(site: str) -> tzinfo:
    """The site's time zone (UTC for a site not in ``SITE_TIME_ZONES`` or without zone data here)."""
    try:
        from zoneinfo import ZoneInfo

        return ZoneInfo(SITE_TIME_ZONES.get(site, "UTC"))
    except Exception:  # ZoneInfoNotFoundError: no tz database on this machine
        return timezone.utc


def local_zone() -> tzinfo | None:
    """This machine's time zone; None: the system's rules (``TZ``, else /etc/localtime), which
    ``astimezone`` applies per instant (summer time included)."""
    return None


def to_utc(value: object) -> datetime | None:
    """A python-chi lease time as aware UTC: a naive datetime (Blazar's UTC), an aware one, or text
    (``"now"`` → None; ``%Y-%m-%d %H:%M`` or ISO 8601, UTC when no offset is given)."""
    if value is None or value == "" or value == "now":
        return None
    if isinstance(value, datetime):
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)
    try:
        parsed = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    return to_utc(parsed)


def ceil_minute(at: datetime) -> datetime:
    """``at`` rounded up to the whole minute (Blazar's resolution)."""
    whole = at.replace(second=0, microsecond=0)
    return whole if whole == at else whole + timedelta(minutes=1)


def parse_start(text: str, site: str, now: datetime | None = None) -> datetime | None:
    """``lease_start`` as aware UTC, rounded up to the minute; None for now (``""``/``"now"``).

    Accepts ISO 8601 (``2026-11-24 09:00`` in the site's time zone, ``2026-11-24T15:00Z``,
    ``2026-11-24T09:00-06:00``) or ``+30m`` / ``+2h`` / ``+1d`` from now.
    """
    text = text.strip()
    if text in ("", "now"):
        return None
    now = now or utcnow()
    relative = RELATIVE.match(text)
    if relative:
        return ceil_minute(now + timedelta(**{UNITS[relative.group(2)]: int(relative.group(1))}))
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ProvisioningError(msg.LEASE_START_NOT_A_TIME(text=text, site=site,
                                                           zone=SITE_TIME_ZONES.get(site, "UTC"))) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=site_zone(site))
    return ceil_minute(parsed.astimezone(timezone.utc))


def show_time(at: datetime, site: str) -> str:
    """``2026-11-24 09:00 CST at CHI@TACC (16:00 CET here)``: the site's wall clock, then this machine's."""
    there = at.astimezone(site_zone(site))
    here = at.astimezone(local_zone())
    text = f"{there:%Y-%m-%d %H:%M} {there.tzname()} at {site}"
    if here.utcoffset() == there.utcoffset() and here.tzname() == there.tzname():
        return text
    day = "%Y-%m-%d " if here.date() != there.date() else ""
    return f"{text} ({here.strftime(day + '%H:%M')} {here.tzname()} here)"


def show_span(seconds: float) -> str:
    """A duration for people: ``2 h 05 min``, ``4 min``, ``40 s``."""
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes = (seconds + 30) // 60
    return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"
