//! The times `reset-offsets` takes, as kafka-consumer-groups.sh reads them: `--to-datetime`
//! an ISO 8601 local date-time, UTC unless it carries an offset (Kafka's `Utils.getDateTime`
//! appends `Z` then), and `--by-duration` an ISO 8601 duration (Java's `Duration.parse`), both
//! in epoch milliseconds.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the epoch, now.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// `YYYY-MM-DDTHH:mm[:SS[.sss]]`, then nothing (UTC), `Z`, or `±HH:MM`, `±HHMM`, `±HH`.
pub fn datetime_ms(s: &str) -> Result<i64, String> {
    let bad = |why: &str| {
        format!("bad date-time '{s}' ({why}): use YYYY-MM-DDTHH:mm:SS.sss, e.g. 2026-12-01T09:30:00.000 or 2026-12-01T09:30:00.000+01:00")
    };
    let (date, time) = s.split_once('T').ok_or_else(|| bad("no 'T'"))?;
    let mut ymd = date.split('-');
    let (Some(y), Some(mo), Some(d), None) = (ymd.next(), ymd.next(), ymd.next(), ymd.next())
    else {
        return Err(bad("the date is not YYYY-MM-DD"));
    };
    let (year, month, day) = (number(y, 4)?, number(mo, 2)?, number(d, 2)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such day"));
    }
    // The zone starts at the first Z, + or - of the time part.
    let zone_at = time.find(['Z', '+', '-']).unwrap_or(time.len());
    let (clock, zone) = time.split_at(zone_at);
    let offset_minutes = zone_offset(zone).ok_or_else(|| bad("the zone is not Z or ±HH:MM"))?;
    let (hms, fraction) = match clock.split_once('.') {
        Some((hms, f)) => (hms, Some(f)),
        None => (clock, None),
    };
    let mut parts = hms.split(':');
    let hour = number(parts.next().unwrap_or(""), 2).map_err(|_| bad("no hour"))?;
    let minute = number(parts.next().unwrap_or(""), 2).map_err(|_| bad("no minute"))?;
    let second = match parts.next() {
        Some(sec) => number(sec, 2).map_err(|_| bad("bad seconds"))?,
        None => 0,
    };
    if parts.next().is_some() || hour > 23 || minute > 59 || second > 59 {
        return Err(bad("no such time"));
    }
    let millis = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 9 && f.bytes().all(|b| b.is_ascii_digit()) => {
            // Milliseconds: the first three digits, padded.
            format!("{f:0<3}")[..3]
                .parse::<i64>()
                .map_err(|_| bad("bad fraction"))?
        }
        Some(_) => return Err(bad("bad fraction of a second")),
    };
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset_minutes * 60;
    Ok(seconds * 1_000 + millis)
}

/// `PnDTnHnMn.nS` (any part may be left out, at least one given), in milliseconds.
pub fn duration_ms(s: &str) -> Result<i64, String> {
    let bad =
        || format!("bad duration '{s}': use ISO 8601 PnDTnHnMnS, e.g. PT15M, P1DT12H, PT0.5S");
    let rest = s
        .strip_prefix('P')
        .or_else(|| s.strip_prefix('p'))
        .ok_or_else(bad)?;
    let (days, time) = match rest.split_once(['T', 't']) {
        Some((days, time)) => (days, Some(time)),
        None => (rest, None),
    };
    let mut total: i64 = 0;
    let mut given = false;
    if !days.is_empty() {
        let n = days
            .strip_suffix(['D', 'd'])
            .and_then(|n| n.parse::<i64>().ok())
            .ok_or_else(bad)?;
        total = n.checked_mul(86_400_000).ok_or_else(bad)?;
        given = true;
    }
    if let Some(mut time) = time {
        if time.is_empty() {
            return Err(bad());
        }
        for (unit, ms) in [('H', 3_600_000.0), ('M', 60_000.0), ('S', 1_000.0)] {
            let Some(at) = time.find([unit, unit.to_ascii_lowercase()]) else {
                continue;
            };
            let n: f64 = time[..at].parse().map_err(|_| bad())?;
            if !n.is_finite() || n < 0.0 || (unit != 'S' && n.fract() != 0.0) {
                return Err(bad());
            }
            total = total.checked_add((n * ms).round() as i64).ok_or_else(bad)?;
            time = &time[at + 1..];
            given = true;
        }
        if !time.is_empty() {
            return Err(bad());
        }
    }
    if !given || total < 0 {
        return Err(bad());
    }
    Ok(total)
}

fn number(text: &str, digits: usize) -> Result<i64, String> {
    if text.len() != digits || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("'{text}' is not {digits} digits"));
    }
    text.parse()
        .map_err(|_| format!("'{text}' is not a number"))
}

/// Minutes east of UTC: "" and "Z" are 0.
fn zone_offset(zone: &str) -> Option<i64> {
    if zone.is_empty() || zone == "Z" {
        return Some(0);
    }
    let sign = match zone.as_bytes()[0] {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let digits: String = zone[1..].chars().filter(|c| *c != ':').collect();
    let (h, m) = match digits.len() {
        2 => (&digits[..2], "00"),
        4 => (&digits[..2], &digits[2..]),
        _ => return None,
    };
    let (h, m) = (number(h, 2).ok()?, number(m, 2).ok()?);
    (h <= 18 && m <= 59).then_some(sign * (h * 60 + m))
}

fn days_in_month(year: i64, month: i64) -> i64 {
    match month {
        2 if year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn date_times_in_utc_or_with_an_offset() {
        assert_eq!(datetime_ms("1970-01-01T00:00:00.000"), Ok(0));
        // `date -u -d 2026-12-01T09:30:15.250Z +%s%3N`
        assert_eq!(
            datetime_ms("2026-12-01T09:30:15.250"),
            Ok(1_796_117_415_250)
        );
        assert_eq!(
            datetime_ms("2026-12-01T09:30:15.250Z"),
            Ok(1_796_117_415_250)
        );
        assert_eq!(
            datetime_ms("2026-12-01T10:30:15.250+01:00"),
            Ok(1_796_117_415_250)
        );
        assert_eq!(
            datetime_ms("2026-12-01T04:30:15.25-0500"),
            Ok(1_796_117_415_250)
        );
        assert_eq!(datetime_ms("2024-02-29T00:00"), Ok(1_709_164_800_000));
        for bad in [
            "2026-12-01",
            "2026-13-01T00:00:00.000",
            "2023-02-29T00:00:00.000",
            "2026-12-01T24:00:00.000",
            "2026-12-01T09:30:00.x",
            "2026-12-01T09:30:00.000+1",
            "26-12-01T09:30:00.000",
        ] {
            assert!(datetime_ms(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn durations_as_java_parses_them() {
        assert_eq!(duration_ms("PT15M"), Ok(900_000));
        assert_eq!(duration_ms("P1DT12H"), Ok(129_600_000));
        assert_eq!(duration_ms("P2D"), Ok(172_800_000));
        assert_eq!(duration_ms("PT1H2M3.5S"), Ok(3_723_500));
        for bad in ["15M", "P", "PT", "PT1.5M", "PT5X", "P1H", "PT-1S", "PT1S2M"] {
            assert!(duration_ms(bad).is_err(), "{bad}");
        }
    }
}
