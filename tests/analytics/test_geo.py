"""Geolocation names (issue 54 item 9): a continent code is never a country.

GeoLite2 places some ranges on a continent only (no country registered for them); geoip2fast
gives such a range the continent as its country (``ASIA Asia``, ``EU Europe``), and the
panel showed the country "ASIA Asia" under the continent "Unknown". As in GoAccess, such a
client's country is ``Unknown``, under its continent."""

from __future__ import annotations

import gzip

from logstream.analytics.geo import UNKNOWN, locate, place
from tests.conftest import COMBINED, data_file

CONTINENT_NAMES = {
    "Africa",
    "Antarctica",
    "Asia",
    "Europe",
    "North America",
    "Oceania",
    "South America",
}


def test_a_continent_only_range_is_an_unknown_country_on_its_continent():
    # 141.0.10.123 is a client of the real elastic log (line 3,876)
    with gzip.open(data_file(COMBINED), "rt", encoding="utf-8", errors="replace") as fh:
        assert any(line.startswith("141.0.10.123 ") for line in fh)
    assert locate("141.0.10.123") == (UNKNOWN, "AS Asia")
    assert locate("62.134.44.20") == (UNKNOWN, "EU Europe")  # line 1,212


def test_no_entry_of_the_database_names_a_continent_as_a_country():
    """Every (code, name) the database can return, named: a country is a country of GeoNames'
    table (``US United States``) or ``Unknown``, never a continent."""
    import geoip2fast.geoip2fast as database

    locate("127.0.0.1")  # loads the database
    entries = [e.split(":", 1) for e in database.mainListNamesCountry]
    assert len(entries) > 200
    continents = set()
    for code, name in entries:
        country, continent = place(code, name)
        assert country.split(" ", 1)[-1] not in CONTINENT_NAMES or country == "AQ Antarctica"
        assert not country.startswith(("ASIA ", "EU ")), (code, name, country)
        continents.add(continent)
    assert {"AS Asia", "EU Europe", "NA North America", UNKNOWN} <= continents
    assert place("EU", "Europe") == (UNKNOWN, "EU Europe")
    assert place("US", "United States") == ("US United States", "NA North America")
