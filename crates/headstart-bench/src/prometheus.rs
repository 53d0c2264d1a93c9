//! Prometheus's text exposition format (version 0.0.4), read back: what `headstart worker --metrics` serves. The
//! fleet benchmark reads its workers' counters and histograms with it, and the tests check the endpoint's page
//! with it, so it refuses what a Prometheus server would: a malformed line, a `TYPE` after its samples or given
//! twice, a family split in two groups, a histogram whose buckets are not cumulative or disagree with its count.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One sample: a line `name{label="value",…} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The sample's name (a histogram's lines end in `_bucket`, `_sum`, `_count`).
    pub name: String,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// A parsed page.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// The `TYPE` of each family that declared one.
    pub types: BTreeMap<String, String>,
    /// The `HELP` of each family that has one.
    pub help: BTreeMap<String, String>,
    /// Every sample, in order.
    pub samples: Vec<Sample>,
}

const TYPES: [&str; 5] = ["counter", "gauge", "histogram", "summary", "untyped"];

/// Parses a page, checking it as described in the [module documentation](self).
pub fn parse(text: &str) -> Result<Exposition, String> {
    let mut page = Exposition::default();
    // Families whose group of lines has ended: a family seen again after another one is split.
    let mut closed = BTreeSet::new();
    let mut current: Option<String> = None;
    for (number, line) in text.lines().enumerate() {
        let fail = |why: String| format!("line {}: {why}: {line:?}", number + 1);
        if line.trim().is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            let mut words = comment.trim_start().splitn(3, ' ');
            let keyword = words.next().unwrap_or_default();
            if keyword != "TYPE" && keyword != "HELP" {
                continue;
            }
            let name = words.next().unwrap_or_default();
            let rest = words.next().unwrap_or_default().to_owned();
            if !is_metric_name(name) {
                return Err(fail(format!("a {keyword} line names no metric")));
            }
            let family = name.to_owned();
            if keyword == "TYPE" {
                if !TYPES.contains(&rest.as_str()) {
                    return Err(fail(format!("unknown type {rest:?}")));
                }
                let sampled = page.samples.iter().any(|sample| {
                    sample.name == family
                        || sample
                            .name
                            .strip_prefix(family.as_str())
                            .is_some_and(|rest| rest.starts_with('_'))
                });
                if page.types.contains_key(&family) || sampled {
                    return Err(fail("TYPE given twice, or after the family's samples".to_owned()));
                }
                page.types.insert(family.clone(), rest);
            } else if page.help.insert(family.clone(), rest).is_some() {
                return Err(fail("HELP given twice".to_owned()));
            }
            enter(&mut current, &mut closed, family).map_err(&fail)?;
            continue;
        }
        let sample = parse_sample(line).map_err(&fail)?;
        let family = family_of(&page, &sample.name);
        if page.types.get(&family).is_some_and(|kind| kind == "counter") && sample.value < 0.0 {
            return Err(fail("a negative counter".to_owned()));
        }
        enter(&mut current, &mut closed, family).map_err(&fail)?;
        page.samples.push(sample);
    }
    check_histograms(&page)?;
    Ok(page)
}

impl Exposition {
    /// The value of the sample `name` whose labels are exactly `labels`.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.samples
            .iter()
            .find(|sample| {
                sample.name == name
                    && sample.labels.len() == labels.len()
                    && labels
                        .iter()
                        .all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v))
            })
            .map(|sample| sample.value)
    }

    /// The sum of the samples `name` over all their label sets (`None` when there is none).
    pub fn sum(&self, name: &str) -> Option<f64> {
        let values: Vec<f64> = self.matching(name, &[]).map(|sample| sample.value).collect();
        (!values.is_empty()).then(|| values.iter().sum())
    }

    /// The buckets `(le, cumulative count)` of histogram `name`, over the label sets that include `labels`.
    pub fn buckets(&self, name: &str, labels: &[(&str, &str)]) -> Vec<(f64, f64)> {
        let bucket = format!("{name}_bucket");
        self.matching(&bucket, labels)
            .filter_map(|sample| Some((parse_value(sample.labels.get("le")?).ok()?, sample.value)))
            .collect()
    }

    fn matching<'a>(&'a self, name: &'a str, labels: &'a [(&str, &str)]) -> impl Iterator<Item = &'a Sample> + 'a {
        self.samples.iter().filter(move |sample| {
            sample.name == name
                && labels
                    .iter()
                    .all(|(k, v)| sample.labels.get(*k).map(String::as_str) == Some(*v))
        })
    }
}

/// The `q` quantile (0–1) of a histogram's buckets as Prometheus's `histogram_quantile` estimates it: linear
/// within the bucket the rank falls in (from 0 for the first), the largest finite bound when it falls in `+Inf`.
/// Buckets may repeat a bound (several label sets or processes): they are added up. `None` without observations.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let mut merged: Vec<(f64, f64)> = Vec::new();
    let mut sorted = buckets.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    for (le, count) in sorted {
        match merged.last_mut() {
            Some(last) if last.0 == le => last.1 += count,
            _ => merged.push((le, count)),
        }
    }
    let total = merged.last().filter(|last| last.0 == f64::INFINITY)?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q.clamp(0.0, 1.0) * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for (le, count) in &merged {
        if *count >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            let within = count - below;
            let fraction = if within > 0.0 { (rank - below) / within } else { 1.0 };
            return Some(lower + (le - lower) * fraction);
        }
        (lower, below) = (*le, *count);
    }
    Some(lower)
}

/// Fetches `http://addr/metrics` (one HTTP/1.0 request, blocking, each step within `timeout`) and returns the
/// page, which must come with status 200.
pub fn fetch(addr: SocketAddr, timeout: Duration) -> Result<String, String> {
    let failed = |error: std::io::Error| format!("GET http://{addr}/metrics: {error}");
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(failed)?;
    stream.set_read_timeout(Some(timeout)).map_err(failed)?;
    stream.set_write_timeout(Some(timeout)).map_err(failed)?;
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .map_err(failed)?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).map_err(failed)?;
    let response = String::from_utf8(response).map_err(|_| format!("GET http://{addr}/metrics: not UTF-8"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("GET http://{addr}/metrics: no header end"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split_whitespace().nth(1) != Some("200") {
        return Err(format!("GET http://{addr}/metrics: {status}"));
    }
    Ok(body.to_owned())
}

/// Moves to `family`'s group of lines; a family whose group ended before is refused.
fn enter(current: &mut Option<String>, closed: &mut BTreeSet<String>, family: String) -> Result<(), String> {
    if current.as_deref() == Some(family.as_str()) {
        return Ok(());
    }
    if closed.contains(&family) {
        return Err(format!("the lines of {family} are split in two groups"));
    }
    if let Some(previous) = current.replace(family) {
        closed.insert(previous);
    }
    Ok(())
}

/// The family a sample belongs to: a histogram's or summary's `_bucket`, `_sum`, `_count` lines belong to it.
fn family_of(page: &Exposition, name: &str) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = name.strip_suffix(suffix) {
            if page
                .types
                .get(base)
                .is_some_and(|kind| kind == "histogram" || kind == "summary")
            {
                return base.to_owned();
            }
        }
    }
    name.to_owned()
}

fn is_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(text: &str) -> Result<f64, String> {
    match text {
        "+Inf" | "Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        "NaN" => Ok(f64::NAN),
        other => other.parse().map_err(|_| format!("{other:?} is not a value")),
    }
}

fn parse_sample(line: &str) -> Result<Sample, String> {
    let name_end = line.find(['{', ' ']).ok_or("a sample without a value")?;
    let name = &line[..name_end];
    if !is_metric_name(name) {
        return Err(format!("{name:?} is not a metric name"));
    }
    let mut rest = &line[name_end..];
    let mut labels = BTreeMap::new();
    if let Some(after) = rest.strip_prefix('{') {
        rest = parse_labels(after, &mut labels)?;
    }
    let mut fields = rest.split_whitespace();
    let value = parse_value(fields.next().ok_or("a sample without a value")?)?;
    if let Some(timestamp) = fields.next() {
        timestamp
            .parse::<i64>()
            .map_err(|_| format!("{timestamp:?} is not a timestamp"))?;
    }
    if fields.next().is_some() {
        return Err("text after the timestamp".to_owned());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

/// Reads `name="value",…}` into `labels`; returns what follows the `}`.
fn parse_labels<'a>(mut text: &'a str, labels: &mut BTreeMap<String, String>) -> Result<&'a str, String> {
    loop {
        text = text.trim_start();
        if let Some(after) = text.strip_prefix('}') {
            return Ok(after);
        }
        let equals = text.find('=').ok_or("a label without a value")?;
        let name = text[..equals].trim();
        if !is_label_name(name) {
            return Err(format!("{name:?} is not a label name"));
        }
        let body = text[equals + 1..]
            .trim_start()
            .strip_prefix('"')
            .ok_or_else(|| format!("label {name}'s value is not quoted"))?;
        let mut value = String::new();
        let mut end = None;
        let mut chars = body.char_indices();
        while let Some((at, c)) = chars.next() {
            match c {
                '"' => {
                    end = Some(at + 1);
                    break;
                }
                '\\' => match chars.next().map(|(_, c)| c) {
                    Some('\\') => value.push('\\'),
                    Some('"') => value.push('"'),
                    Some('n') => value.push('\n'),
                    other => return Err(format!("label {name}: unknown escape {other:?}")),
                },
                c => value.push(c),
            }
        }
        let end = end.ok_or_else(|| format!("label {name}'s value is not closed"))?;
        if labels.insert(name.to_owned(), value).is_some() {
            return Err(format!("label {name} given twice"));
        }
        text = body[end..].trim_start();
        match text.strip_prefix(',') {
            Some(after) => text = after,
            None if text.starts_with('}') => {}
            None => return Err(format!("after label {name}: neither ',' nor '}}'")),
        }
    }
}

/// A label set without `le`, as one histogram series' key.
type Labels = Vec<(String, String)>;

/// Every histogram: each label set's buckets have `le`, are cumulative, and end with `+Inf` equal to `_count`.
fn check_histograms(page: &Exposition) -> Result<(), String> {
    for (family, _) in page.types.iter().filter(|(_, kind)| *kind == "histogram") {
        let bucket_name = format!("{family}_bucket");
        let mut series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
        for sample in page.samples.iter().filter(|sample| sample.name == bucket_name) {
            let le = sample
                .labels
                .get("le")
                .ok_or_else(|| format!("{bucket_name}: a bucket without le"))?;
            let le = parse_value(le)?;
            let rest: Vec<(String, String)> = sample
                .labels
                .iter()
                .filter(|(k, _)| *k != "le")
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            series.entry(rest).or_default().push((le, sample.value));
        }
        for (labels, buckets) in series {
            let cumulative = buckets
                .windows(2)
                .all(|pair| pair[0].0 < pair[1].0 && pair[0].1 <= pair[1].1);
            if !cumulative {
                return Err(format!("{family} {labels:?}: buckets not in order or not cumulative"));
            }
            let count_labels: Vec<(&str, &str)> = labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let count = page.value(&format!("{family}_count"), &count_labels);
            match buckets.last() {
                Some((le, last)) if le.is_infinite() && Some(*last) == count => {}
                _ => return Err(format!("{family} {labels:?}: no +Inf bucket equal to its _count")),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
