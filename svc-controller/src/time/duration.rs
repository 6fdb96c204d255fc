//! Durations in Go's `time.ParseDuration` notation (`90s`, `1h30m`, `250ms`, `1.5h`): the
//! grammar the configuration reads and the schedule's descriptions write back.

use std::time::Duration;

/// Largest accepted duration: `i64::MAX` nanoseconds (about 292 years), as in Go and in the
/// nanosecond numbers of the JSON API.
const MAX_NANOS: u128 = i64::MAX as u128;

/// Parses a duration: a sequence of decimal numbers, each with an optional fraction and a
/// unit (`ns`, `us`, `µs`, `ms`, `s`, `m`, `h`), such as `90s`, `5m`, `1h30m`, `250ms` or
/// `1.5h`; or a bare integer, which counts nanoseconds. A leading `+` is accepted; negative
/// values, values above `i64::MAX` nanoseconds and anything else are errors.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration".into());
    }
    if s.starts_with('-') {
        return Err(format!("negative duration {s:?} is not allowed"));
    }
    let s = s.strip_prefix('+').unwrap_or(s);
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        let nanos: u128 = s
            .parse()
            .map_err(|_| format!("duration {text:?} is too large"))?;
        return from_nanos(nanos, text);
    }

    let mut rest = s;
    let mut total: u128 = 0;
    if rest.is_empty() {
        return Err(format!("invalid duration {text:?}"));
    }
    while !rest.is_empty() {
        // Integer part.
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let (int_digits, after) = rest.split_at(int_len);
        rest = after;
        // Fraction.
        let mut frac_digits = "";
        if let Some(after_dot) = rest.strip_prefix('.') {
            let frac_len = after_dot.bytes().take_while(u8::is_ascii_digit).count();
            frac_digits = &after_dot[..frac_len];
            rest = &after_dot[frac_len..];
        }
        if int_digits.is_empty() && frac_digits.is_empty() {
            return Err(format!(
                "invalid duration {text:?}: expected a number (forms: 90s, 5m, 1h30m, 250ms)"
            ));
        }
        // Unit.
        let unit_len = rest
            .char_indices()
            .find(|(_, c)| c.is_ascii_digit() || *c == '.')
            .map_or(rest.len(), |(i, _)| i);
        let (unit, after) = rest.split_at(unit_len);
        rest = after;
        let unit_nanos: u128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60 * 1_000_000_000,
            "h" => 3600 * 1_000_000_000,
            "" => {
                return Err(format!(
                    "missing unit in duration {text:?} (units: ns, us, ms, s, m, h)"
                ));
            }
            other => {
                return Err(format!(
                    "unknown unit {other:?} in duration {text:?} (units: ns, us, ms, s, m, h)"
                ));
            }
        };
        let too_large = || format!("duration {text:?} is too large");
        let int: u128 = if int_digits.is_empty() {
            0
        } else if int_digits.len() > 30 {
            return Err(too_large());
        } else {
            int_digits.parse().map_err(|_| too_large())?
        };
        let mut value = int.checked_mul(unit_nanos).ok_or_else(too_large)?;
        // Only the first 20 fraction digits matter at nanosecond precision.
        let frac_used = &frac_digits[..frac_digits.len().min(20)];
        if !frac_used.is_empty() {
            let frac: u128 = frac_used.parse().map_err(|_| too_large())?;
            let scale = 10u128.pow(frac_used.len() as u32);
            value = value
                .checked_add(frac * unit_nanos / scale)
                .ok_or_else(too_large)?;
        }
        total = total.checked_add(value).ok_or_else(too_large)?;
        if total > MAX_NANOS {
            return Err(too_large());
        }
    }
    from_nanos(total, text)
}

fn from_nanos(nanos: u128, text: &str) -> Result<Duration, String> {
    if nanos > MAX_NANOS {
        return Err(format!("duration {text:?} is too large"));
    }
    let secs = (nanos / 1_000_000_000) as u64;
    let sub = (nanos % 1_000_000_000) as u32;
    Ok(Duration::new(secs, sub))
}

/// Formats a duration compactly in the notation [`parse_duration`] reads back: `5m`,
/// `1h30m`, `1m30s`, `250ms`, `1s500ms`; zero is `0s`.
pub fn format_duration(d: Duration) -> String {
    if d.is_zero() {
        return "0s".into();
    }
    let secs = d.as_secs();
    let nanos = d.subsec_nanos();
    let mut out = String::new();
    let (h, m, s) = (secs / 3600, (secs / 60) % 60, secs % 60);
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if m > 0 {
        out.push_str(&format!("{m}m"));
    }
    if s > 0 {
        out.push_str(&format!("{s}s"));
    }
    let (ms, us, ns) = (nanos / 1_000_000, (nanos / 1_000) % 1_000, nanos % 1_000);
    if ms > 0 {
        out.push_str(&format!("{ms}ms"));
    }
    if us > 0 {
        out.push_str(&format!("{us}us"));
    }
    if ns > 0 {
        out.push_str(&format!("{ns}ns"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Duration {
        parse_duration(text).expect("duration should parse")
    }

    #[test]
    fn units_and_sequences() {
        assert_eq!(ok("90s"), Duration::from_secs(90));
        assert_eq!(ok("5m"), Duration::from_secs(300));
        assert_eq!(ok("1h30m"), Duration::from_secs(5400));
        assert_eq!(ok("250ms"), Duration::from_millis(250));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("10us"), Duration::from_micros(10));
        assert_eq!(ok("10µs"), Duration::from_micros(10));
        assert_eq!(ok("10μs"), Duration::from_micros(10));
        assert_eq!(ok("7ns"), Duration::from_nanos(7));
        assert_eq!(ok("1h1m1s1ms1us1ns"), Duration::new(3661, 1_001_001));
        assert_eq!(ok(".5s"), Duration::from_millis(500));
        assert_eq!(ok("1.s"), Duration::from_secs(1));
        assert_eq!(ok("+2s"), Duration::from_secs(2));
        assert_eq!(ok(" 3s "), Duration::from_secs(3));
        assert_eq!(ok("0.000000001s"), Duration::from_nanos(1));
        assert_eq!(ok("1.0000000001s"), Duration::from_secs(1));
    }

    #[test]
    fn bare_integer_is_nanoseconds() {
        assert_eq!(ok("0"), Duration::ZERO);
        assert_eq!(ok("1500000000"), Duration::from_millis(1500));
        assert_eq!(
            ok("9223372036854775807"),
            Duration::from_nanos(i64::MAX as u64)
        );
    }

    #[test]
    fn errors() {
        for bad in [
            "", " ", "-1s", "-5", "5x", "s", ".s", "1.5", "1h 30m", "1hh", "abc", "1e3s", "+",
            "5 m", "1,5s",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?} should be rejected");
        }
        let err = parse_duration("5x").expect_err("unknown unit");
        assert!(err.contains("unknown unit \"x\""), "{err}");
    }

    #[test]
    fn overflow() {
        for bad in [
            "9223372036854775808",
            "99999999999999999999999999999999999999999",
            "2562048h",
            "9999999999999999999999h",
            "2562047h47m16.854775808s",
        ] {
            let err = parse_duration(bad).expect_err("overflow");
            assert!(err.contains("too large"), "{bad}: {err}");
        }
        assert_eq!(
            ok("2562047h47m16.854775807s"),
            Duration::from_nanos(i64::MAX as u64)
        );
    }

    #[test]
    fn format_round_trips() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(5400), "1h30m"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_millis(1500), "1s500ms"),
            (Duration::new(3661, 1_001_001), "1h1m1s1ms1us1ns"),
            (Duration::from_secs(86400 * 2), "48h"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(ok(text), d);
        }
    }
}
