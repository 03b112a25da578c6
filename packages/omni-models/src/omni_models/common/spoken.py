"""English text to its spoken form: abbreviations, numbers, years, dates, times, currency, ordinals,
phone numbers, numeric dates (12/25/2023, 2023-12-25), URLs and email addresses.

Number words come from ``num2words`` (a maintained library with the English
rules for cardinals, ordinals and years), read the American way (no "and"
inside a number, no commas). The rules here only decide *which* reading a
number gets: ``$3.50`` is currency, ``21st`` an ordinal, ``3:30 pm`` a time,
``Jan. 5, 1999`` a date with a year, ``in 1999`` a year, anything else a
cardinal or a decimal. Sentence splitting is not done here: it needs the
original punctuation (:mod:`omni_models.espeak.normalize` uses pysbd on the raw text).
"""

from __future__ import annotations

import re
import unicodedata

from num2words import num2words

ABBREVIATIONS: dict[str, str] = {
    "Mr.": "Mister", "Mrs.": "Missus", "Ms.": "Miz", "Dr.": "Doctor", "Prof.": "Professor", "Sr.": "Senior",
    "Jr.": "Junior", "Mt.": "Mount", "Gen.": "General", "Capt.": "Captain", "Lt.": "Lieutenant", "Sgt.": "Sergeant",
    "Inc.": "Incorporated", "Ltd.": "Limited", "Co.": "Company", "Corp.": "Corporation", "Ave.": "Avenue",
    "Rd.": "Road", "approx.": "approximately", "dept.": "department", "vs.": "versus", "etc.": "et cetera",
    "e.g.": "for example", "i.e.": "that is",
}
"""Abbreviations read as words. Keys are matched case-sensitively with their dot."""
MONTHS = {
    "Jan": "January", "Feb": "February", "Mar": "March", "Apr": "April", "May": "May", "Jun": "June", "Jul": "July",
    "Aug": "August", "Sep": "September", "Sept": "September", "Oct": "October", "Nov": "November", "Dec": "December",
}
_MONTH_ORDER = tuple(dict.fromkeys(MONTHS.values()))
_MONTH_NAMES = "|".join(sorted(set(MONTHS.values()), key=len, reverse=True))
_YEAR_CUES = "in|since|by|from|until|till|through|during|before|after|circa|of|year|around"
_CURRENCY_NAMES = {"$": ("dollar", "cent"), "£": ("pound", "penny"), "€": ("euro", "cent")}

_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u2013": "-", "\u2014": ", "})
_ABBREV_RE = re.compile(r"(?<![\w.])(" + "|".join(re.escape(k) for k in sorted(ABBREVIATIONS, key=len, reverse=True)) + r")(?!\w)")
_MONTH_ABBREV_RE = re.compile(r"\b(" + "|".join(sorted(MONTHS, key=len, reverse=True)) + r")\.(?=\s|$)")
_NUMBER_SIGN_RE = re.compile(r"\b(?:No|no)\.\s*(?=\d)")  # "No. 5" is "number five"; "No." otherwise the word
_SAINT_RE = re.compile(r"(?<![\w.])St\.(?=\s+[A-Z])")  # "St." before a name is "Saint", after one "Street"
_STREET_RE = re.compile(r"(?<![\w.])St\.")
_INITIALISM_RE = re.compile(r"(?<![\w.])((?:[A-Z]\.){2,})")
_MERIDIEM = r"([ap])(?:\.m\.|\s?m\b)"  # "p.m." takes its dots; "pm." leaves the sentence's
_TIME_RE = re.compile(r"\b(\d{1,2}):(\d{2})(?:\s*" + _MERIDIEM + ")?", re.IGNORECASE)
_CLOCK_RE = re.compile(r"\b(\d{1,2})\s*" + _MERIDIEM, re.IGNORECASE)
_DATE_RE = re.compile(r"\b(" + _MONTH_NAMES + r")\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?")
_YEAR_RE = re.compile(r"\b(" + _YEAR_CUES + r")\s+(1[1-9]\d\d|20\d\d)\b(?![\d,.]\d)", re.IGNORECASE)
_DECADE_RE = re.compile(r"\b(1[1-9]\d0|20\d0)'?s\b")
_CURRENCY_RE = re.compile(r"([$£€])\s?(\d[\d,]*)(?:\.(\d{1,2}))?\b")
_PERCENT_RE = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s?%")
_ORDINAL_RE = re.compile(r"\b(\d[\d,]*)(st|nd|rd|th)\b", re.IGNORECASE)
_DECIMAL_RE = re.compile(r"(?<![\d.])(-?)(\d[\d,]*)?\.(\d+)\b")
_INTEGER_RE = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)\b")
_URL_RE = re.compile(r"\b(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)
_EMAIL_RE = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
_URL_SYMBOLS = {".": "dot", "/": "slash", "-": "dash", "_": "underscore", "@": "at", ":": "colon", "?": "question mark",
                "=": "equals", "&": "and", "#": "hash", "%": "percent", "+": "plus", "~": "tilde"}
_NUMERIC_DATE_RE = re.compile(r"(?<![\w/.])(\d{1,2})/(\d{1,2})/(\d{4})(?![\w/])")
_ISO_DATE_RE = re.compile(r"(?<![\w-])(\d{4})-(\d{2})-(\d{2})(?![\w-])")
_PHONE_RE = re.compile(r"(?<![\w+])(\+\d{1,3}[\s.-]?)?(\(\d{3}\)|\d{3})[\s.-]?(\d{3})[\s.-](\d{4})(?![\w-])")
_INTERNATIONAL_RE = re.compile(r"(?<![\w+])\+(\d{1,3})((?:[\s.-]\d{1,4}){2,5})(?![\w-])")
_SPACE_RE = re.compile(r"\s+")
_ONES = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def _american(words: str) -> str:
    """num2words writes British "one hundred and five, ..."; American speech drops the "and" and commas."""
    return words.replace(",", "").replace(" and ", " ")


def cardinal(n: int) -> str:
    """``1234`` -> ``"one thousand two hundred thirty-four"``; negatives say "minus"."""
    return "minus " + cardinal(-n) if n < 0 else _american(num2words(n))


def ordinal(n: int) -> str:
    """``21`` -> ``"twenty-first"``."""
    return _american(num2words(n, to="ordinal"))


def year(n: int) -> str:
    """``1999`` -> ``"nineteen ninety-nine"``, ``2005`` -> ``"two thousand five"``, ``1905`` -> ``"nineteen oh five"``."""
    return _american(num2words(n, to="year")).replace("oh-", "oh ")


def digits(text: str) -> str:
    """Read a digit string one digit at a time (decimal fractions, long ids)."""
    return " ".join(_ONES[int(ch)] for ch in text if ch.isdigit())


def decimal(text: str) -> str:
    """``"3.14"`` -> ``"three point one four"``; ``".5"`` -> ``"zero point five"``."""
    whole, _, frac = text.partition(".")
    head = cardinal(int(whole)) if whole else "zero"
    return f"{head} point {digits(frac)}" if frac else head


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def _plural(n: int, word: str) -> str:
    if n == 1:
        return f"one {word}"
    return f"{cardinal(n)} {'pence' if word == 'penny' else word + 's'}"


def _currency(match: re.Match[str]) -> str:
    major_name, minor_name = _CURRENCY_NAMES[match.group(1)]
    spoken = _plural(_int(match.group(2)), major_name)
    if match.group(3):
        minor = int(match.group(3).ljust(2, "0"))
        if minor:
            spoken += f" and {_plural(minor, minor_name)}"
    return spoken


def _ends_sentence(match: re.Match[str]) -> str:
    """A "." when the match swallowed a dot that also ended the sentence ("at 5 p.m. Then...")."""
    rest = match.string[match.end():]
    return "." if match.group(0).endswith(".") and (not rest.strip() or re.match(r"\s+[A-Z]", rest)) else ""


def _time(match: re.Match[str]) -> str:
    hour, minute, half = int(match.group(1)), int(match.group(2)), match.group(3)
    if hour > 24 or minute > 59:
        return match.group(0)  # not a time of day (a ratio, a score): the number rules read it
    suffix = f" {half.upper()} M" if half else ""
    if minute == 0:
        spoken = f"{cardinal(hour)}{suffix}" if half else f"{cardinal(hour)} o'clock"
    else:
        spoken = f"{cardinal(hour)} {f'oh {cardinal(minute)}' if minute < 10 else cardinal(minute)}{suffix}"
    return spoken + _ends_sentence(match)


def _date(match: re.Match[str]) -> str:
    month, day, yr = match.group(1), int(match.group(2)), match.group(3)
    if not 1 <= day <= 31:
        return match.group(0)
    return f"{month} {ordinal(day)}" + (f", {year(int(yr))}" if yr else "")


def _number_words(text: str) -> str:
    negative = text.startswith("-")
    body = text.lstrip("-").replace(",", "")
    return ("minus " if negative else "") + (decimal(body) if "." in body else cardinal(int(body)))


def _decimal(match: re.Match[str]) -> str:
    sign, whole, frac = match.groups()
    return ("minus " if sign else "") + decimal(f"{(whole or '').replace(',', '')}.{frac}")


def _integer(match: re.Match[str]) -> str:
    sign, body = match.groups()
    return ("minus " if sign else "") + cardinal(_int(body))


def _address(match: re.Match[str]) -> str:
    """A URL or email address read out: "example dot com slash docs"; digits one by one; no scheme."""
    text, tail = match.group(0), ""
    while text and text[-1] in ".,;:!?)]":  # the sentence's punctuation, not the address's
        text, tail = text[:-1], text[-1] + tail
    text = re.sub(r"^https?://", "", text, flags=re.IGNORECASE)
    words = []
    for part in re.findall(r"[A-Za-z]+|\d|[^A-Za-z\d]", text):
        if part.isdigit():
            words.append(_ONES[int(part)])
        elif part.isalpha():
            words.append(" ".join(part.lower()) if part.lower() == "www" else part)
        elif part in _URL_SYMBOLS:
            words.append(_URL_SYMBOLS[part])
    return " ".join(words) + tail


def _calendar_date(month: int, day: int, year_: int) -> str | None:
    if not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{_MONTH_ORDER[month - 1]} {ordinal(day)}, {year(year_)}"


def _numeric_date(match: re.Match[str]) -> str:
    """12/25/2023 (month first, as in the US), or 25/12/2023 when the first number cannot be a month."""
    first, second, year_ = int(match.group(1)), int(match.group(2)), int(match.group(3))
    month, day = (second, first) if first > 12 else (first, second)
    return _calendar_date(month, day, year_) or match.group(0)


def _iso_date(match: re.Match[str]) -> str:
    return _calendar_date(int(match.group(2)), int(match.group(3)), int(match.group(1))) or match.group(0)


def _phone(match: re.Match[str]) -> str:
    """555-123-4567 is read digit by digit, group by group: "five five five, one two three, four five six seven"."""
    country, area, exchange, line = match.groups()
    groups = ([f"plus {digits(country.strip(' .-+'))}"] if country else []) + [digits(area.strip("()")), digits(exchange), digits(line)]
    return ", ".join(groups)


def _international(match: re.Match[str]) -> str:
    groups = [g for g in re.split(r"[\s.-]", match.group(2)) if g]
    return ", ".join([f"plus {digits(match.group(1))}", *(digits(g) for g in groups)])


def _initialism(match: re.Match[str]) -> str:
    """"U.S.A." is read letter by letter; its last dot still ends a sentence when one ends there."""
    letters = " ".join(match.group(1).replace(".", ""))
    rest = match.string[match.end():]
    return letters + ("." if not rest.strip() or re.match(r"\s+[A-Z]", rest) else "")


def spoken_form(text: str) -> str:
    """``text`` as it is read aloud; sentence punctuation is kept so a splitter still sees it."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    text = _URL_RE.sub(_address, text)
    text = _EMAIL_RE.sub(_address, text)
    text = _NUMERIC_DATE_RE.sub(_numeric_date, text)
    text = _ISO_DATE_RE.sub(_iso_date, text)
    text = _PHONE_RE.sub(_phone, text)
    text = _INTERNATIONAL_RE.sub(_international, text)
    text = _NUMBER_SIGN_RE.sub("number ", text)
    text = _STREET_RE.sub("Street", _SAINT_RE.sub("Saint", text))
    text = _MONTH_ABBREV_RE.sub(lambda m: MONTHS[m.group(1)], text)
    text = _ABBREV_RE.sub(lambda m: ABBREVIATIONS[m.group(1)], text)
    text = _INITIALISM_RE.sub(_initialism, text)
    text = _CURRENCY_RE.sub(_currency, text)
    text = _TIME_RE.sub(_time, text)
    text = _CLOCK_RE.sub(lambda m: f"{cardinal(int(m.group(1)))} {m.group(2).upper()} M{_ends_sentence(m)}", text)
    text = _DATE_RE.sub(_date, text)
    text = _YEAR_RE.sub(lambda m: f"{m.group(1)} {year(int(m.group(2)))}", text)
    text = _DECADE_RE.sub(lambda m: year(int(m.group(1)))[:-1] + "ies" if year(int(m.group(1))).endswith("y") else year(int(m.group(1))) + "s", text)
    text = _PERCENT_RE.sub(lambda m: _number_words(m.group(1)) + " percent", text)
    text = _ORDINAL_RE.sub(lambda m: ordinal(_int(m.group(1))), text)
    text = _DECIMAL_RE.sub(_decimal, text)
    text = _INTEGER_RE.sub(_integer, text)
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return _SPACE_RE.sub(" ", text).strip()
