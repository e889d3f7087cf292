//! Calendar arithmetic for both binaries' time stamps: RFC 3339 for the shim's API and Heat's
//! `creation_time`, Keystone's token times (`expires_at`, `issued_at`) for the agent, HTTP dates
//! (RFC 9110 §5.6.7) for `Last-Modified` and `If-Modified-Since`. One proleptic Gregorian
//! conversion (Howard Hinnant's algorithm) serves all of them; times before 1970 do not occur.

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
pub fn civil_from_days(days: u64) -> (u64, u64, u64) {
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

/// Unix milliseconds as RFC 3339 UTC (`2026-11-21T05:00:00Z`).
pub fn rfc3339(millis: u64) -> String {
    let seconds = millis / 1000;
    let (year, month, day) = civil_from_days(seconds / SECONDS_PER_DAY);
    let time = seconds % SECONDS_PER_DAY;
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", time / 3600, time / 60 % 60, time % 60)
}

/// Parses an RFC 3339 UTC time as Keystone writes it (`2026-11-24T14:00:00.000000Z`; the fraction
/// and the `Z` or `+00:00` optional) into Unix milliseconds; `None` when malformed or before 1970.
pub fn parse_rfc3339_millis(text: &str) -> Option<u64> {
    let text = text.trim();
    let text = text.strip_suffix('Z').or_else(|| text.strip_suffix("+00:00")).unwrap_or(text);
    let (date, time) = text.split_once('T')?;
    let mut date_parts = date.splitn(3, '-').map(|part| part.parse::<u64>().ok());
    let (year, month, day) = (date_parts.next()??, date_parts.next()??, date_parts.next()??);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut clock_parts = clock.splitn(3, ':').map(|part| part.parse::<u64>().ok());
    let (hour, minute, second) = (clock_parts.next()??, clock_parts.next()??, clock_parts.next()??);
    let valid = year >= 1970
        && (1..=12).contains(&month)
        && (1..=31).contains(&day)
        && hour < 24
        && minute < 60
        && second <= 60
        && fraction.chars().all(|c| c.is_ascii_digit());
    if !valid {
        return None;
    }
    let millis: u64 = format!("{fraction:0<3}").get(..3)?.parse().ok()?;
    let days = days_from_civil(year, month, day);
    Some(((days * 24 + hour) * 60 + minute) * 60_000 + second * 1000 + millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_and_http_dates_agree() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_779_339_600_000), "2026-05-21T05:00:00Z");
        assert_eq!(format_http_date(784_111_777), "Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn rfc3339_parses_as_keystone_writes_it() {
        assert_eq!(parse_rfc3339_millis("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339_millis("1970-01-02T00:00:01.5Z"), Some(86_401_500));
        assert_eq!(parse_rfc3339_millis("2026-11-24T14:00:00.123456Z"), Some(1_795_528_800_123));
        assert_eq!(parse_rfc3339_millis("2026-11-24T14:00:00+00:00"), Some(1_795_528_800_000));
        assert_eq!(parse_rfc3339_millis("2000-02-29T00:00:00Z"), Some(951_782_400_000));
        assert_eq!(parse_rfc3339_millis(&rfc3339(1_779_339_600_000)), Some(1_779_339_600_000));
        for bad in [
            "",
            "2026-11-24",
            "2026-13-01T00:00:00Z",
            "2026-11-24T25:00:00Z",
            "x-1-1T0:0:0Z",
            "2026-11-24T14:00:00.1aZ",
            "1969-12-31T23:59:59Z",
        ] {
            assert_eq!(parse_rfc3339_millis(bad), None, "{bad}");
        }
    }
}
