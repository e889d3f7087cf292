//! HTTP conditional-request arithmetic for metadata documents: the `"<version>"` entity tag,
//! `If-None-Match` matching, and HTTP dates (RFC 9110 §5.6.7) for `Last-Modified` and
//! `If-Modified-Since`. Pure functions; no I/O.

use axum::http::{HeaderMap, header};

/// The entity tag of a document version.
pub(super) fn entity_tag(version: u64) -> String {
    format!("\"{version}\"")
}

/// Whether `If-None-Match` names this version (weak tags compare equal, as RFC 9110 asks for
/// `If-None-Match`; `*` matches any current document). `None` when the header is absent.
pub(super) fn if_none_match(headers: &HeaderMap, version: u64) -> Option<bool> {
    let value = headers.get(header::IF_NONE_MATCH)?;
    let Ok(text) = value.to_str() else {
        return Some(false);
    };
    let current = entity_tag(version);
    Some(text.split(',').map(str::trim).any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == current))
}

/// Whether `If-Modified-Since` says the client's copy is at least as new as `last_modified`.
/// An unparsable date on either side falls back to comparing the texts (RFC 9110 says to
/// ignore an invalid date; an exact echo of our own header is still a safe match).
pub(super) fn not_modified_since(headers: &HeaderMap, last_modified: &str) -> bool {
    let Some(since) = headers.get(header::IF_MODIFIED_SINCE).and_then(|value| value.to_str().ok()) else {
        return false;
    };
    match (parse_http_date(since), parse_http_date(last_modified)) {
        (Some(since), Some(modified)) => since >= modified,
        _ => since.trim() == last_modified.trim(),
    }
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]; // 1970-01-01 was a Thursday
const SECONDS_PER_DAY: u64 = 86_400;

/// Unix seconds as an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), for `Last-Modified`.
pub fn format_http_date(unix_seconds: u64) -> String {
    let days = unix_seconds / SECONDS_PER_DAY;
    let seconds = unix_seconds % SECONDS_PER_DAY;
    let (year, month, day) = civil_from_days(days);
    let weekday = WEEKDAYS[usize::try_from(days % 7).unwrap_or(0)];
    let month_name = MONTHS[usize::try_from(month - 1).unwrap_or(0)];
    let (hour, minute, second) = (seconds / 3600, seconds / 60 % 60, seconds % 60);
    format!("{weekday}, {day:02} {month_name} {year} {hour:02}:{minute:02}:{second:02} GMT")
}

/// Unix seconds of an HTTP date in any of the three forms recipients must accept:
/// IMF-fixdate, RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
/// (`Sun Nov  6 08:49:37 1994`). The weekday is not checked. `None` if it is none of them.
pub fn parse_http_date(text: &str) -> Option<u64> {
    let text = text.trim();
    let (weekday, rest) = text.split_once([',', ' '])?;
    if !weekday.chars().all(|character| character.is_ascii_alphabetic()) {
        return None;
    }
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (year, month, day, time) = match fields.as_slice() {
        [day, month, year, time, "GMT"] => (year.parse().ok()?, *month, day.parse().ok()?, *time),
        [date, time, "GMT"] => {
            let mut parts = date.split('-');
            let (day, month, year) = (parts.next()?, parts.next()?, parts.next()?);
            let two_digit: u64 = year.parse().ok()?;
            // RFC 850 years: 70-99 are 19xx, the rest 20xx (as most implementations read them).
            let year = if two_digit >= 70 { 1900 + two_digit } else { 2000 + two_digit };
            (year, month, day.parse().ok()?, *time)
        }
        [month, day, time, year] => (year.parse().ok()?, *month, day.parse().ok()?, *time),
        _ => return None,
    };
    let month = u64::try_from(MONTHS.iter().position(|name| *name == month)? + 1).ok()?;
    let mut clock = time.split(':').map(str::parse::<u64>);
    let (hour, minute, second) = (clock.next()?.ok()?, clock.next()?.ok()?, clock.next()?.ok()?);
    if clock.next().is_some() || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 || year < 1970 {
        return None;
    }
    Some(days_from_civil(year, month, day) * SECONDS_PER_DAY + hour * 3600 + minute * 60 + second)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm),
/// for years from 1970.
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The inverse of [`days_from_civil`].
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let shifted = days + 719_468;
    let era = shifted / 146_097;
    let day_of_era = shifted - era * 146_097;
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 { month_index + 3 } else { month_index - 9 };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}
