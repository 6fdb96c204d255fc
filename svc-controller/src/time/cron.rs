//! Cron expressions, parsed by croner: five fields or six with seconds first, and the
//! nicknames; an error names the field and value at fault.

use std::fmt;

use chrono::{DateTime, NaiveDateTime, Timelike};

use crate::time::schedule::ScheduleError;

/// A parsed cron expression, kept with the text it was written as.
#[derive(Clone)]
pub struct CronExpr {
    text: String,
    cron: croner::Cron,
    /// Its slots are times of day ([`names_times_of_day`]): see [`crate::time::timezone`].
    fixed_time: bool,
}

impl fmt::Debug for CronExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CronExpr({:?})", self.text)
    }
}

impl PartialEq for CronExpr {
    fn eq(&self, other: &CronExpr) -> bool {
        self.text == other.text
    }
}

impl Eq for CronExpr {}

/// The field names of a cron expression, in order, for messages.
const CRON_FIELDS: [&str; 6] = [
    "second",
    "minute",
    "hour",
    "day of month",
    "month",
    "day of week",
];

fn cron_parser() -> croner::parser::CronParser {
    croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Optional)
        .year(croner::parser::Year::Disallowed)
        .build()
}

impl CronExpr {
    /// The expression as written (blanks normalised).
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Whether its slots are times of day ([`names_times_of_day`]).
    pub fn is_fixed_time(&self) -> bool {
        self.fixed_time
    }

    /// Parses a cron expression; the error names the field and value at fault.
    pub fn parse(text: &str) -> Result<CronExpr, ScheduleError> {
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        match cron_parser().parse(&text) {
            // Each field is checked alone: `0 0 30 2 *` parses, and no date has it. There
            // is no year field, so what matches no date from 1970 on never matches.
            Ok(cron)
                if cron
                    .find_next_occurrence(&DateTime::UNIX_EPOCH, false)
                    .is_err() =>
            {
                Err(ScheduleError(format!(
                    "{text:?} matches no date: no month it names has its day of month"
                )))
            }
            Ok(cron) => {
                let fixed_time = names_times_of_day(&text);
                Ok(CronExpr {
                    text,
                    cron,
                    fixed_time,
                })
            }
            Err(err) => Err(ScheduleError(explain_cron_error(&text, &err.to_string()))),
        }
    }

    /// The first wall-clock time strictly after `civil` the expression matches.
    pub(super) fn next_civil_after(&self, civil: NaiveDateTime) -> Option<NaiveDateTime> {
        // croner keeps the fraction of a second it is given: a slot after 00:07:00.5
        // would be 00:15:00.5. Its search starts a second on, so whole seconds are
        // still strictly after.
        let civil = civil.with_nanosecond(0)?;
        self.cron
            .find_next_occurrence(&civil.and_utc(), false)
            .ok()
            .map(|t| t.naive_utc())
    }
}

/// Whether a cron expression names times of day, as Vixie cron decides for daylight-saving
/// changes: neither its minute nor its hour is a wildcard (`*`, `*/N`). `30 2 * * *`,
/// `30 2,14 * * *` and `0 8-17 * * 1-5` do; `*/15 * * * *`, `0 * * * *` and `@hourly`
/// do not. `text` has been parsed already.
fn names_times_of_day(text: &str) -> bool {
    if text.starts_with('@') {
        return !text.eq_ignore_ascii_case("@hourly");
    }
    let fields: Vec<&str> = text.split(' ').collect();
    let (minute, hour) = match fields.as_slice() {
        [_, minute, hour, _, _, _] | [minute, hour, _, _, _] => (*minute, *hour),
        _ => return false,
    };
    !minute.starts_with('*') && !hour.starts_with('*')
}

/// Which field of `text` is at fault: each field is tried alone among wildcards.
fn explain_cron_error(text: &str, message: &str) -> String {
    let fields: Vec<&str> = text.split(' ').collect();
    if text.starts_with('@') {
        return format!(
            "unknown nickname {text:?} (expected @yearly, @annually, @monthly, @weekly, \
             @daily, @midnight or @hourly)"
        );
    }
    let names: &[&str] = match fields.len() {
        5 => &CRON_FIELDS[1..],
        6 => &CRON_FIELDS[..],
        n => {
            return format!(
                "a cron expression has 5 fields (minute hour day-of-month month \
                 day-of-week) or 6 (seconds first); {text:?} has {n}"
            );
        }
    };
    for (index, value) in fields.iter().enumerate() {
        let mut probe = vec!["*"; fields.len()];
        probe[index] = value;
        if let Err(err) = cron_parser().parse(&probe.join(" ")) {
            return format!(
                "cron field {} ({}) is invalid: {value:?} ({err}) in {text:?}",
                index + 1,
                names[index]
            );
        }
    }
    format!("invalid cron expression {text:?}: {message}")
}
