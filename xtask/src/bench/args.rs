//! The walk over a bench's command line that the serve benches share: a switch stands alone,
//! every other option takes the argument after it as its value.

use anyhow::{Context, Result, bail};

/// Calls `set` with each option of `args` in order and its value: `None` for one of
/// `switches`, the next argument for any other option (an error where there is none).
pub(super) fn for_each_option<'a>(
    args: &[&'a str],
    switches: &[&str],
    mut set: impl FnMut(&'a str, Option<&'a str>) -> Result<()>,
) -> Result<()> {
    let mut args = args.iter();
    while let Some(&arg) = args.next() {
        let value = match switches.contains(&arg) {
            true => None,
            false => Some(
                *args
                    .next()
                    .with_context(|| format!("{arg} needs a value"))?,
            ),
        };
        set(arg, value)?;
    }
    Ok(())
}

/// `value` as the positive count the option `option` takes.
pub(super) fn positive_count(option: &str, value: &str) -> Result<usize> {
    match value.parse() {
        Ok(0) | Err(_) => bail!("{option} needs a positive number, not {value:?}"),
        Ok(n) => Ok(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(args: &[&str]) -> Result<Vec<(String, Option<String>)>> {
        let mut seen = Vec::new();
        for_each_option(args, &["--switch"], |arg, value| {
            seen.push((arg.to_string(), value.map(str::to_string)));
            Ok(())
        })?;
        Ok(seen)
    }

    #[test]
    fn switches_stand_alone_and_other_options_take_the_next_argument() {
        let seen = walk(&["--switch", "--rounds", "3", "--switch"]).unwrap();
        let expected = [
            ("--switch".to_string(), None),
            ("--rounds".to_string(), Some("3".to_string())),
            ("--switch".to_string(), None),
        ];
        assert_eq!(seen, expected);
        let missing = walk(&["--switch", "--rounds"]).unwrap_err();
        assert_eq!(missing.to_string(), "--rounds needs a value");
    }

    #[test]
    fn a_count_is_positive() {
        assert_eq!(positive_count("--rounds", "4").unwrap(), 4);
        for bad in ["0", "-1", "x"] {
            assert!(positive_count("--rounds", bad).is_err(), "{bad}");
        }
    }
}
