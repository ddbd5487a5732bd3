//! A tiny parser for `--name VALUE` / `--name=VALUE` flags, all positive integers.

/// Parsed integer flags, each with a default.
#[derive(Debug)]
pub struct Flags {
    values: Vec<(&'static str, usize)>,
}

impl Flags {
    /// Parses `args` against `spec` (`(name, default)` pairs, names without `--`).
    pub fn parse(args: &[String], spec: &[(&'static str, usize)]) -> Result<Flags, String> {
        let mut values = spec.to_vec();
        let mut it = args.iter();
        while let Some(arg) = it.next() {
            let body = arg.strip_prefix("--").ok_or_else(|| format!("unexpected argument `{arg}`"))?;
            let (name, inline) = match body.split_once('=') {
                Some((name, v)) => (name, Some(v.to_string())),
                None => (body, None),
            };
            let slot =
                values.iter_mut().find(|(n, _)| *n == name).ok_or_else(|| format!("unknown option `--{name}`"))?;
            let raw = match inline {
                Some(v) => v,
                None => it.next().cloned().ok_or_else(|| format!("`--{name}` needs a value"))?,
            };
            slot.1 = match parse_count(&raw) {
                Some(0) => return Err(format!("`--{name}` must be at least 1")),
                Some(v) => v,
                None => return Err(format!("`--{name}`: `{raw}` is not a number")),
            };
        }
        Ok(Flags { values })
    }

    /// The value of flag `name` (which must be in the spec).
    pub fn get(&self, name: &str) -> usize {
        self.values.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("flag `{name}` not declared")).1
    }
}

/// A non-negative integer; `_` and `,` may group digits (`1_000_000`).
fn parse_count(s: &str) -> Option<usize> {
    let digits: String = s.chars().filter(|c| *c != '_' && *c != ',').collect();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    const SPEC: &[(&str, usize)] = &[("n", 100), ("chunk", 256)];

    #[test]
    fn defaults_and_both_syntaxes() {
        let f = Flags::parse(&args(""), SPEC).unwrap();
        assert_eq!((f.get("n"), f.get("chunk")), (100, 256));
        let f = Flags::parse(&args("--n 1_000 --chunk=64"), SPEC).unwrap();
        assert_eq!((f.get("n"), f.get("chunk")), (1000, 64));
    }

    #[test]
    fn errors() {
        assert!(Flags::parse(&args("--m 3"), SPEC).unwrap_err().contains("unknown option"));
        assert!(Flags::parse(&args("--n"), SPEC).unwrap_err().contains("needs a value"));
        assert!(Flags::parse(&args("--n -3"), SPEC).unwrap_err().contains("not a number"));
        assert!(Flags::parse(&args("--n=0"), SPEC).unwrap_err().contains("at least 1"));
        assert!(Flags::parse(&args("n 3"), SPEC).unwrap_err().contains("unexpected argument"));
    }
}
